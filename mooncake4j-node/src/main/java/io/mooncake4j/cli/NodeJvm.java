package io.mooncake4j.cli;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The command line of another JVM running this node's {@link Main} the way this JVM runs it: on the
 * module path when this one is (the module path and class path of this JVM, with the options
 * {@code bin/mooncake4j} passes), on the class path otherwise. The demos' child processes
 * ({@code demo --processes}) and the tests that start a node in a child JVM use it.
 */
final class NodeJvm {

    /** The node's module. */
    static final String MODULE = "io.mooncake4j.node";

    /**
     * What every JVM of the node needs on the module path, as in {@code bin/mooncake4j}: native access
     * for the modules that use the FFM API (and the class path's JCuda), {@code sun.nio.ch} for the TCP
     * engine's gathering writes, Jetty's internal {@code HttpConnection} and its parser's chunk length for
     * the header deadline and the chunk limit ({@code Deadlines}, {@code Exchange}), and the
     * system modules a class-path run resolves (Jlama needs {@code jdk.unsupported}) plus the Vector API.
     */
    static final List<String> MODULE_PATH_OPTIONS = List.of(
            "--enable-native-access=io.mooncake4j,io.mooncake4j.node,io.mooncake4j.store,io.mooncake4j.testing,"
                    + "jlama.core,ALL-UNNAMED",
            "--add-exports", "java.base/sun.nio.ch=io.mooncake4j",
            "--add-exports", "org.eclipse.jetty.server/org.eclipse.jetty.server.internal=" + MODULE,
            "--add-opens", "org.eclipse.jetty.http/org.eclipse.jetty.http=" + MODULE,
            "--add-modules", "ALL-DEFAULT,jdk.incubator.vector",
            "--sun-misc-unsafe-memory-access=allow");

    /** The same on the class path. */
    static final List<String> CLASS_PATH_OPTIONS = List.of("--enable-native-access=ALL-UNNAMED",
            "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED", "--add-modules", "jdk.incubator.vector",
            "--sun-misc-unsafe-memory-access=allow");

    /**
     * Set by {@code bin/mooncake4j} to the folder patched into {@code jlama.core} (jlama-native's
     * classes, which share Jlama's package); a child gets the same patch.
     */
    static final String JLAMA_NATIVE_PROPERTY = "mooncake4j.jlama.native";

    private NodeJvm() {}

    /**
     * {@code java}, the options above, {@code options}, the paths and the main class; append the
     * command and its flags.
     */
    static List<String> command(List<String> options) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        String classPath = System.getProperty("java.class.path", "");
        if (Main.class.getModule().isNamed()) {
            cmd.addAll(MODULE_PATH_OPTIONS);
            String jlamaNative = System.getProperty(JLAMA_NATIVE_PROPERTY, "");
            if (!jlamaNative.isEmpty()) {
                cmd.addAll(List.of("--patch-module", "jlama.core=" + jlamaNative,
                        "-D" + JLAMA_NATIVE_PROPERTY + "=" + jlamaNative));
            }
            cmd.addAll(options);
            cmd.addAll(List.of("-p", System.getProperty("jdk.module.path")));
            if (!classPath.isEmpty()) {
                cmd.addAll(List.of("-cp", classPath));
            }
            cmd.addAll(List.of("-m", MODULE + "/" + Main.class.getName()));
        } else {
            cmd.addAll(CLASS_PATH_OPTIONS);
            cmd.addAll(options);
            cmd.addAll(List.of("-cp", classPath, Main.class.getName()));
        }
        return cmd;
    }
}
