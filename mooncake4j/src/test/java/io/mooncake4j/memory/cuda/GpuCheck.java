package io.mooncake4j.memory.cuda;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectPackage;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TagFilter;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

/**
 * Entry point of {@code scripts/gpu-check.sh}: prints what CUDA reports, runs every test tagged
 * {@code gpu} through the JUnit launcher, runs {@link CudaCopyBench}, and ends with one summary
 * block. Exit status 0 when everything passed, 1 on a failure, 2 when CUDA is unavailable
 * (with {@code GPU_CHECK_FORCE} set it carries on anyway, which checks the plumbing on a host
 * without a GPU: the tests are skipped and the benchmark fails).
 *
 * <pre>java -cp ... io.mooncake4j.memory.cuda.GpuCheck [benchSizeMiB=256] [iterations=5] [device=0]</pre>
 */
public final class GpuCheck {

    private GpuCheck() {}

    public static void main(String[] args) {
        long sizeMiB = args.length > 0 ? Long.parseLong(args[0]) : 256;
        int iterations = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        int device = args.length > 2 ? Integer.parseInt(args[2]) : 0;
        System.exit(run(sizeMiB, iterations, device));
    }

    static int run(long sizeMiB, int iterations, int device) {
        long start = System.nanoTime();
        System.out.println("== mooncake4j gpu-check");
        System.out.println("java " + Runtime.version() + " on " + System.getProperty("os.name") + " "
                + System.getProperty("os.arch"));
        System.out.println(CudaAvailability.summary());
        boolean available = CudaAvailability.isAvailable();
        if (!available && System.getenv("GPU_CHECK_FORCE") == null) {
            System.out.println("RESULT: CUDA UNAVAILABLE (nothing run)");
            return 2;
        }
        System.out.println("JCuda natives in " + CudaAvailability.nativeLibraryDirectory());
        for (int d = 0; d < CudaAvailability.deviceCount(); d++) {
            System.out.println("cuda:" + d + " = " + CudaAvailability.deviceName(d));
        }

        System.out.println("== tests tagged gpu");
        LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request()
                .selectors(selectPackage("io.mooncake4j"))
                .filters(TagFilter.includeTags("gpu"))
                .build();
        Launcher launcher = LauncherFactory.create();
        SummaryGeneratingListener summary = new SummaryGeneratingListener();
        List<String> lines = new ArrayList<>();
        TestExecutionListener printer = new TestExecutionListener() {
            @Override
            public void executionSkipped(TestIdentifier id, String reason) {
                if (id.isTest()) {
                    print("SKIP", id, reason);
                }
            }

            @Override
            public void executionFinished(TestIdentifier id, TestExecutionResult result) {
                if (id.isTest()) {
                    print(result.getStatus().name(), id, result.getThrowable().map(Throwable::toString).orElse(""));
                }
            }

            private void print(String status, TestIdentifier id, String detail) {
                String line = String.format(Locale.ROOT, "%-10s %s %s", status, id.getLegacyReportingName(), detail);
                lines.add(line);
                System.out.println(line);
            }
        };
        launcher.execute(request, summary, printer);
        TestExecutionSummary s = summary.getSummary();
        s.printFailuresTo(new PrintWriter(System.out, true), 20);

        System.out.println("== copy benchmark on cuda:" + device + " (" + sizeMiB + " MiB, " + iterations
                + " iterations, synchronous cudaMemcpy)");
        List<CudaCopyBench.Result> bench = List.of();
        String benchError = null;
        try {
            bench = CudaCopyBench.run(sizeMiB << 20, iterations, device);
            bench.forEach(System.out::println);
        } catch (RuntimeException e) {
            benchError = e.toString();
            e.printStackTrace(System.out);
        }

        boolean ok = s.getTotalFailureCount() == 0 && s.getTestsFoundCount() > 0 && benchError == null
                && s.getTestsSucceededCount() > 0;
        System.out.println("== SUMMARY");
        System.out.println(CudaAvailability.summary()
                + (available ? "; cuda:" + device + " = " + CudaAvailability.deviceName(device) : ""));
        System.out.printf(Locale.ROOT, "gpu tests: %d found, %d passed, %d failed, %d skipped, %d aborted%n",
                s.getTestsFoundCount(), s.getTestsSucceededCount(), s.getTotalFailureCount(),
                s.getTestsSkippedCount(), s.getTestsAbortedCount());
        for (CudaCopyBench.Result r : bench) {
            System.out.println("bench " + r);
        }
        if (benchError != null) {
            System.out.println("bench FAILED: " + benchError);
        }
        System.out.printf(Locale.ROOT, "elapsed %.1f s%n", (System.nanoTime() - start) / 1e9);
        System.out.println("RESULT: " + (ok ? "PASS" : "FAIL"));
        return ok ? 0 : 1;
    }
}
