package io.mooncake4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The library's packages import each other without cycles, read from the compiled classes as
 * {@code jdeps -verbose:package} would (every class a class file names, in its constant pool and
 * descriptors): the strongly connected components of the package graph, one package each. Any cycle
 * fails, naming its edges. (The last one, the worker's package and its send/receive/loop packages, was
 * taken apart by issue #35: those packages take their limits, stats and health through types of their
 * own, in {@code connector.worker.loop}.)
 * Also: no transport reads the environment (its settings come from its provider).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PackageCyclesTest {

    private static final Pattern NAMED = Pattern.compile("io/mooncake4j/((?:[a-z0-9_]+/)*)[A-Z][A-Za-z0-9_$]*");
    private static final Set<String> TRANSPORTS = Set.of("io.mooncake4j.engine.tcp", "io.mooncake4j.engine.rdma",
            "io.mooncake4j.engine.shm", "io.mooncake4j.engine.cudaipc");

    private static Map<String, Set<String>> edges;
    private static Map<String, List<String>> environmentReaders;

    @BeforeAll
    static void readClasses() throws IOException, URISyntaxException {
        Path root = Path.of(MooncakeException.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        edges = new TreeMap<>();
        environmentReaders = new TreeMap<>();
        try (Stream<Path> files = Files.walk(root)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".class")).toList()) {
                if (f.getFileName().toString().equals("module-info.class")) {
                    continue;
                }
                String pkg = root.relativize(f.getParent()).toString().replace('/', '.').replace('\\', '.');
                // class names and descriptors are plain ASCII in the constant pool
                String text = new String(Files.readAllBytes(f), StandardCharsets.ISO_8859_1);
                Set<String> out = edges.computeIfAbsent(pkg, k -> new TreeSet<>());
                Matcher m = NAMED.matcher(text);
                while (m.find()) {
                    String to = ("io/mooncake4j/" + m.group(1)).replaceAll("/$", "").replace('/', '.');
                    if (!to.equals(pkg)) {
                        out.add(to);
                    }
                }
                if (TRANSPORTS.contains(pkg) && text.contains("getenv")) {
                    environmentReaders.computeIfAbsent(pkg, k -> new ArrayList<>()).add(f.getFileName().toString());
                }
            }
        }
    }

    @Test
    void thePackageGraphHasNoCycle() {
        assertTrue(edges.size() > 20, "the library's classes were read: " + edges.keySet());
        assertTrue(edges.get("io.mooncake4j.engine.core").contains("io.mooncake4j.engine.spi"),
                "edges are found (the core imports the SPI)");
        List<String> found = new ArrayList<>();
        for (Set<String> c : cycles(edges)) {
            found.add(c + " " + witness(c));
        }
        assertEquals(List.of(), found, "packages that import each other (cycle, then its edges)");
    }

    @Test
    void theExceptionRootTheMemoryPackagesAndTheEngineAreInNoCycle() {
        for (Set<String> c : cycles(edges)) {
            for (String p : List.of("io.mooncake4j", "io.mooncake4j.memory", "io.mooncake4j.memory.cuda",
                    "io.mooncake4j.engine", "io.mooncake4j.engine.core", "io.mooncake4j.engine.spi")) {
                assertTrue(!c.contains(p), p + " is in the cycle " + c + " " + witness(c));
            }
        }
        assertTrue(!edges.get("io.mooncake4j").contains("io.mooncake4j.engine"), "the root names no area");
        assertTrue(!edges.get("io.mooncake4j.engine").contains("io.mooncake4j.engine.core"),
                "the public engine package names nothing of the core (built-in kinds are providers)");
    }

    @Test
    void noTransportReadsTheEnvironment() {
        assertEquals(Map.of(), environmentReaders, "transports get their settings from their provider");
    }

    /** The package graph's strongly connected components of more than one package (Tarjan, iterative enough for ~50 nodes). */
    static List<Set<String>> cycles(Map<String, Set<String>> graph) {
        Map<String, Integer> index = new HashMap<>();
        Map<String, Integer> low = new HashMap<>();
        Deque<String> stack = new ArrayDeque<>();
        Set<String> onStack = new TreeSet<>();
        List<Set<String>> out = new ArrayList<>();
        int[] counter = {0};
        for (String v : graph.keySet()) {
            if (!index.containsKey(v)) {
                connect(v, graph, index, low, stack, onStack, out, counter);
            }
        }
        return out;
    }

    private static void connect(String v, Map<String, Set<String>> graph, Map<String, Integer> index,
            Map<String, Integer> low, Deque<String> stack, Set<String> onStack, List<Set<String>> out, int[] counter) {
        index.put(v, counter[0]);
        low.put(v, counter[0]++);
        stack.push(v);
        onStack.add(v);
        for (String w : graph.getOrDefault(v, Set.of())) {
            if (!index.containsKey(w)) {
                connect(w, graph, index, low, stack, onStack, out, counter);
                low.put(v, Math.min(low.get(v), low.get(w)));
            } else if (onStack.contains(w)) {
                low.put(v, Math.min(low.get(v), index.get(w)));
            }
        }
        if (low.get(v).equals(index.get(v))) {
            Set<String> component = new TreeSet<>();
            String w;
            do {
                w = stack.pop();
                onStack.remove(w);
                component.add(w);
            } while (!w.equals(v));
            if (component.size() > 1) {
                out.add(component);
            }
        }
    }

    /** The edges inside cycle {@code c}, to name what to take apart. */
    private static Map<String, Set<String>> witness(Set<String> c) {
        Map<String, Set<String>> inside = new TreeMap<>();
        for (String p : c) {
            Set<String> to = new TreeSet<>(edges.getOrDefault(p, Set.of()));
            to.retainAll(c);
            inside.put(p, to);
        }
        return inside;
    }

    @Test
    void aCycleIsFound() {
        Map<String, Set<String>> g = Map.of("a", Set.of("b"), "b", Set.of("c"), "c", Set.of("a"), "d", Set.of("a"));
        assertEquals(List.of(Set.of("a", "b", "c")), cycles(g));
        assertEquals(List.of(), cycles(Map.of("a", Set.of("b"), "b", Set.of())));
    }
}
