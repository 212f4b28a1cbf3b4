package io.mooncake4j.cli;

import java.io.PrintStream;

/** {@code bin/mooncake4j version}: the version and the Java runtime in use. */
final class VersionCommand implements CliCommand {

    @Override
    public String name() {
        return "version";
    }

    @Override
    public String summary() {
        return "print the mooncake4j version and the Java runtime";
    }

    @Override
    public String usage() {
        return "usage: bin/mooncake4j version";
    }

    @Override
    public int run(Flags flags, PrintStream out, PrintStream err) {
        flags.rejectUnknown();
        String v = Main.class.getPackage().getImplementationVersion();
        out.println("mooncake4j " + (v == null ? "(development build)" : v));
        out.println("java " + Runtime.version() + " (" + System.getProperty("java.vm.vendor") + ")");
        return 0;
    }
}
