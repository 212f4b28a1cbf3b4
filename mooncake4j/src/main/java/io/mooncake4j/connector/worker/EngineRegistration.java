package io.mooncake4j.connector.worker;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.internal.sys.Bytes;
import io.mooncake4j.internal.sys.ResourceLimits;
import io.mooncake4j.memory.MemoryStorage;
import java.util.List;
import java.util.Locale;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Registers a plan's storages with the engine (one batch, retried as configured) and tells the operator
 * what it registers (DEBUG) and, when the engine refuses, why and what to check. Caller's thread.
 */
final class EngineRegistration {

    private static final Logger LOG = LoggerFactory.getLogger(MooncakeConnectorWorker.class);

    private EngineRegistration() {}

    /**
     * {@code batchRegisterMemory} of every storage of {@code plan}, tried {@code 1 + retries} times.
     *
     * @throws KvCacheRegistrationException when the last try failed
     */
    static void register(TransferEngine engine, RegistrationPlan plan, int retries) {
        logInventory(plan);
        List<MemoryStorage> storages = plan.storages();
        long[] addrs = new long[storages.size()];
        long[] lens = new long[storages.size()];
        for (int i = 0; i < addrs.length; i++) {
            addrs[i] = storages.get(i).address();
            lens[i] = storages.get(i).byteSize();
        }
        int attempts = 1 + retries;
        int ret = 0;
        int made = 0;
        for (int attempt = 1; attempt <= attempts; attempt++) {
            made = attempt;
            ret = engine.batchRegisterMemory(addrs, lens);
            if (ret == 0) {
                break;
            }
            if (attempt < attempts) {
                LOG.warn("batchRegisterMemory of {} storage(s), {} returned {} ({}); retrying ({} of {})",
                        addrs.length, Bytes.human(plan.totalBytes()), ret, ErrorCodes.name(ret), attempt + 1, attempts);
            }
        }
        if (ret != 0) {
            throw failure(plan, ret, made);
        }
    }

    private static void logInventory(RegistrationPlan plan) {
        if (!LOG.isDebugEnabled()) {
            return;
        }
        LOG.debug("KV-cache registration inventory: {}", plan.summary());
        for (MemoryStorage s : plan.storages()) {
            LOG.debug("  storage 0x{} {} at {} with {} region(s)", Long.toHexString(s.address()),
                    Bytes.human(s.byteSize()), s.location(), plan.regionCount(s));
        }
    }

    /** The exception of a registration the engine refused ({@code ret}) after {@code attempts} tries. */
    private static KvCacheRegistrationException failure(RegistrationPlan plan, int ret, int attempts) {
        String advice;
        if (plan.memlockVerdict() == MemlockVerdict.EXCEEDS_LIMIT) {
            advice = plan.memlockWarning().orElseThrow();
        } else if (RegistrationPlan.pinsHostMemory(plan.protocol())) {
            advice = "Check that the RDMA device can register this memory (ulimit -l, nvidia-peermem for GPU "
                    + "memory); see docs/registration.md.";
        } else {
            advice = "See docs/registration.md.";
        }
        String details = String.format(Locale.ROOT,
                "The engine returned %d (%s) after %d attempt(s) for %d storage(s), %s in total at %s; protocol %s; "
                        + "RLIMIT_MEMLOCK soft limit %s. %s",
                ret, ErrorCodes.name(ret), attempts, plan.storages().size(), Bytes.human(plan.totalBytes()),
                plan.locations(), plan.protocol(),
                plan.memlockLimit().isPresent() ? ResourceLimits.describe(plan.memlockLimit().getAsLong()) : "unknown",
                advice);
        return new KvCacheRegistrationException(details, ret, attempts, plan.totalBytes(), plan.memlockLimit(),
                plan.locations());
    }
}
