package io.mooncake4j.cli;

import java.io.PrintStream;

/** One {@code bin/mooncake4j} subcommand. */
interface CliCommand {

    /** The word after {@code bin/mooncake4j}. */
    String name();

    /** One line for {@code bin/mooncake4j help}. */
    String summary();

    /** Usage text for {@code bin/mooncake4j <name> --help}. */
    String usage();

    /**
     * Every flag the command accepts, as spelt in its usage text. When not empty, {@link Main}
     * rejects an unknown flag and any positional argument before {@link #run} reads a flag (so
     * {@code --frobnicate} is reported first). Empty (the default): the command checks itself.
     */
    default java.util.Set<String> flagNames() {
        return java.util.Set.of();
    }

    /**
     * Runs the command.
     *
     * @return the process exit code: 0 success, 1 failure, 2 bad usage
     */
    int run(Flags flags, PrintStream out, PrintStream err) throws Exception;
}
