package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.MooncakeException;
import java.io.IOException;
import java.io.InputStream;
import java.lang.module.ModuleDescriptor;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The node reads the library only through the library's face: every library package its compiled
 * classes name (read from the class files as {@code jdeps} would) is exported, to everyone or to
 * {@code io.mooncake4j.node} by name, in the library's module descriptor as compiled (not in this
 * JVM's graph, which the tests' command line widens for white-box tests). The packages exported to
 * the node by name must all still be used, so that no opening outlives its reason. The tests run on
 * the module path, so the node is the named module it says it is.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LibraryFaceTest {

    private static final String NODE = "io.mooncake4j.node";
    private static final Pattern NAMED = Pattern.compile("io/mooncake4j/((?:[a-z0-9_]+/)*)[A-Z][A-Za-z0-9_$]*");

    @Test
    void theNodeIsANamedModuleOnTheModulePath() {
        assertEquals(NODE, Main.class.getModule().getName(), "the node's tests run on the module path");
        assertEquals("io.mooncake4j", MooncakeException.class.getModule().getName());
        assertTrue(Main.class.getModule().canRead(MooncakeException.class.getModule()));
    }

    @Test
    void theNodeUsesOnlyPackagesTheLibraryExportsToIt() throws IOException, URISyntaxException {
        ModuleDescriptor library = descriptor(MooncakeException.class);
        assertEquals("io.mooncake4j", library.name());
        Set<String> open = new TreeSet<>();
        Set<String> toNode = new TreeSet<>();
        for (ModuleDescriptor.Exports e : library.exports()) {
            if (!e.isQualified()) {
                open.add(e.source());
            } else if (e.targets().contains(NODE)) {
                toNode.add(e.source());
            }
        }
        assertTrue(open.contains("io.mooncake4j.connector.worker"), "the descriptor was read: " + open);

        Map<String, Set<String>> used = libraryPackagesUsedByTheNode(library.packages());
        Map<String, Set<String>> beyond = new TreeMap<>(used);
        beyond.keySet().removeAll(open);
        beyond.keySet().removeAll(toNode);
        assertEquals(Map.of(), beyond, "node classes using library packages not exported to " + NODE);

        Set<String> unused = new TreeSet<>(toNode);
        unused.removeAll(used.keySet());
        assertEquals(Set.of(), unused, "packages the library exports to " + NODE + " that the node no longer uses");
    }

    /** Library package → the node's class files naming a class of it. */
    private static Map<String, Set<String>> libraryPackagesUsedByTheNode(Set<String> libraryPackages)
            throws IOException, URISyntaxException {
        Path node = Path.of(Main.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        assertTrue(Files.isDirectory(node) || Files.isRegularFile(node), node.toString());
        Map<String, Set<String>> used = new TreeMap<>();
        try (Stream<Path> files = Files.walk(node)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".class")).toList()) {
                String text = new String(Files.readAllBytes(f), StandardCharsets.ISO_8859_1);
                Matcher m = NAMED.matcher(text);
                while (m.find()) {
                    String pkg = ("io/mooncake4j/" + m.group(1)).replaceAll("/$", "").replace('/', '.');
                    if (libraryPackages.contains(pkg)) {
                        used.computeIfAbsent(pkg, k -> new TreeSet<>()).add(node.relativize(f).toString());
                    }
                }
            }
        }
        assertTrue(used.containsKey("io.mooncake4j.connector.worker"), "the node's classes were read: " + used);
        return used;
    }

    private static ModuleDescriptor descriptor(Class<?> inModule) throws IOException, URISyntaxException {
        Path where = Path.of(inModule.getProtectionDomain().getCodeSource().getLocation().toURI());
        if (Files.isDirectory(where)) {
            try (InputStream in = Files.newInputStream(where.resolve("module-info.class"))) {
                return ModuleDescriptor.read(in);
            }
        }
        try (var jar = new java.util.jar.JarFile(where.toFile())) {
            try (InputStream in = jar.getInputStream(jar.getEntry("module-info.class"))) {
                return ModuleDescriptor.read(in);
            }
        }
    }
}
