package io.mooncake4j.connector.worker.loop;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Collects the deaths of the worker's watched threads (its loops): each is
 * logged once at ERROR and counted; one that is not recovered turns the worker unhealthy
 * ({@link Snapshot}, which the worker reports as its {@code WorkerHealth}). Thread-safe.
 */
public final class HealthMonitor {

    private static final Logger LOG = LoggerFactory.getLogger(HealthMonitor.class);
    private static final int MAX_PROBLEMS = 64;

    private final LongAdder deaths = new LongAdder();
    private final LongAdder recoveries = new LongAdder();
    private final List<String> problems = new ArrayList<>(); // guarded by this
    private final Set<String> exhaustedComponents = new HashSet<>(); // guarded by this

    /** A watched thread died; {@code recovering} says whether its owner is about to rebuild it. */
    public void died(String component, Throwable cause, boolean recovering) {
        deaths.increment();
        String line = component + " died: " + cause;
        if (recovering) {
            LOG.error("Mooncake {}; recreating it", line, cause);
        } else {
            LOG.error("Mooncake {}; it cannot be recovered and this worker no longer serves that port: restart the "
                    + "worker", line, cause);
            synchronized (this) {
                if (problems.size() < MAX_PROBLEMS) {
                    problems.add(line);
                }
            }
        }
    }

    /** The component of an earlier {@link #died} serves again. */
    public void recovered(String component) {
        recoveries.increment();
        LOG.warn("Mooncake {} recovered and serves again", component);
    }

    /** A recovery that was attempted did not succeed. */
    public void recoveryFailed(String component, Throwable cause) {
        LOG.error("Mooncake {} could not be recovered: {}; restart the worker", component, cause.toString(), cause);
        synchronized (this) {
            if (problems.size() < MAX_PROBLEMS) {
                problems.add(component + " could not be recovered: " + cause);
            }
        }
    }

    /**
     * A bounded resource of {@code component} ran out (a leak or an overload, not a thread death):
     * logged at ERROR the first time for that component, and the worker turns unhealthy.
     */
    public void exhausted(String component, String detail, Throwable cause) {
        String line = component + " exhausted: " + detail;
        synchronized (this) {
            if (!exhaustedComponents.add(component)) {
                return;
            }
            if (problems.size() < MAX_PROBLEMS) {
                problems.add(line);
            }
        }
        LOG.error("Mooncake {}; restart the worker if it persists", line, cause);
    }

    /**
     * What the monitor knows now (the worker's {@code WorkerHealth} is made from it).
     *
     * @param healthy        no unrecovered death or exhaustion
     * @param problems       one line per unrecovered death, failed recovery or exhaustion
     * @param loopDeaths     watched threads that died, recovered or not
     * @param loopRecoveries deaths after which the component serves again
     */
    public record Snapshot(boolean healthy, List<String> problems, long loopDeaths, long loopRecoveries) {

        /** Keeps an unmodifiable copy of the problems. */
        public Snapshot {
            problems = List.copyOf(problems);
        }
    }

    public Snapshot snapshot() {
        List<String> p;
        synchronized (this) {
            p = List.copyOf(problems);
        }
        return new Snapshot(p.isEmpty(), p, deaths.sum(), recoveries.sum());
    }
}
