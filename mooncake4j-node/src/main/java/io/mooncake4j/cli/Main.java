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
                new MakeModelCommand(),
                new ProxyCommand(),
                new RegisterCommand(),
                new StoreCommand(),
                new ServeCommand(),
                new VersionCommand());
    }

    public static void main(String[] args) {
        System.exit(run(args, System.out, System.err));
    }

    /**
     * Runs a command line and returns its exit code (tests call this directly): 0 success, 1 a
     * runtime failure, 2 a usage error. A usage error prints one line naming the flag and value;
     * {@code --help} prints the command's full text.
     */
    public static int run(String[] args, PrintStream out, PrintStream err) {
        if (args.length == 0 || args[0].equals("help") || args[0].equals("--help") || args[0].equals("-h")) {
            printHelp(args.length == 0 ? err : out);
            return args.length == 0 ? 2 : 0;
        }
        CliCommand cmd = commands().stream().filter(c -> c.name().equals(args[0])).findFirst().orElse(null);
        if (cmd == null) {
            err.printf(Locale.ROOT, "mooncake4j: unknown command '%s'; commands: %s (bin/mooncake4j help)%n", args[0],
                    String.join(", ", commands().stream().map(CliCommand::name).toList()));
            return 2;
        }
        List<String> rest = Arrays.asList(args).subList(1, args.length);
        if (rest.contains("--help") || rest.contains("-h")) {
            out.println(cmd.usage());
            return 0;
        }
        try {
            Flags flags = Flags.parse(rest);
            if (!cmd.flagNames().isEmpty()) {
                flags.rejectUnknown(cmd.flagNames());
                flags.rejectPositional();
            }
            return cmd.run(flags, out, err);
        } catch (Flags.UsageException e) {
            err.printf(Locale.ROOT, "mooncake4j %s: %s (bin/mooncake4j %s --help lists the flags)%n", cmd.name(),
                    e.getMessage(), cmd.name());
            return 2;
        } catch (Exception e) {
            err.println("mooncake4j " + cmd.name() + ": " + (e.getMessage() != null ? e.getMessage() : e.toString()));
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
