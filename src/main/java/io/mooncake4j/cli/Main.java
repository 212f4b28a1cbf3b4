package io.mooncake4j.cli;

import java.io.PrintStream;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/** Entry point of {@code bin/mooncake4j}. */
public final class Main {

    private Main() {}

    static List<CliCommand> commands() {
        return List.of(
                new BenchCommand(),
                new DemoCommand(),
                new ProxyCommand(),
                new RegisterCommand(),
                new ServeCommand(),
                new VersionCommand());
    }

    public static void main(String[] args) {
        System.exit(run(args, System.out, System.err));
    }

    /** Runs a command line and returns its exit code (tests call this directly). */
    public static int run(String[] args, PrintStream out, PrintStream err) {
        if (args.length == 0 || args[0].equals("help") || args[0].equals("--help") || args[0].equals("-h")) {
            printHelp(args.length == 0 ? err : out);
            return args.length == 0 ? 2 : 0;
        }
        CliCommand cmd = commands().stream().filter(c -> c.name().equals(args[0])).findFirst().orElse(null);
        if (cmd == null) {
            err.printf(Locale.ROOT, "mooncake4j: unknown command '%s'%n%n", args[0]);
            printHelp(err);
            return 2;
        }
        List<String> rest = Arrays.asList(args).subList(1, args.length);
        if (rest.contains("--help") || rest.contains("-h")) {
            out.println(cmd.usage());
            return 0;
        }
        try {
            Flags flags = Flags.parse(rest);
            return cmd.run(flags, out, err);
        } catch (Flags.UsageException e) {
            err.println("mooncake4j " + cmd.name() + ": " + e.getMessage());
            err.println();
            err.println(cmd.usage());
            return 2;
        } catch (Exception e) {
            err.println("mooncake4j " + cmd.name() + ": " + e.getMessage());
            return 1;
        }
    }

    private static void printHelp(PrintStream s) {
        s.println("usage: bin/mooncake4j <command> [flags]     (bin/mooncake4j <command> --help for its flags)");
        s.println();
        s.println("commands:");
        for (CliCommand c : commands()) {
            s.printf(Locale.ROOT, "  %-10s %s%n", c.name(), c.summary());
        }
    }
}
