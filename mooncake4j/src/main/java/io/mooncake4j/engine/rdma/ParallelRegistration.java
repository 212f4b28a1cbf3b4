package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.rdma.RdmaProvider.Device;
import io.mooncake4j.engine.rdma.RdmaProvider.MemoryRegion;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Registers one host range on every device at once, as Mooncake registers its contexts in
 * parallel: pinning is paid per device ({@code ibv_reg_mr} walks and pins every page for each
 * NIC), so N devices one after another cost N× the wall time. Ranges below
 * {@link #PARALLEL_MIN_BYTES}, or a single device, are registered on the calling thread (a
 * thread start costs more than a small pin). Helper threads are platform threads
 * ({@code mooncake-rdma-register-N}: the downcall may block for seconds, which would pin a
 * virtual thread's carrier) and are joined before {@link #register} returns.
 *
 * <p>All or nothing: when any device fails, the regions the others made are closed and the
 * first failure is thrown. Thread-safe (no state besides the thread counter).
 */
final class ParallelRegistration {

    private static final Logger LOG = LoggerFactory.getLogger(ParallelRegistration.class);
    private static final AtomicInteger THREADS = new AtomicInteger();
    /** Smallest range registered on several devices in parallel. */
    static final long PARALLEL_MIN_BYTES = 1L << 20;

    private ParallelRegistration() {}

    /** {@code ibv_reg_mr} of {@code [address, address+length)} on each device; the regions in device order. */
    static MemoryRegion[] register(Device[] devices, long address, long length, int access) {
        MemoryRegion[] mrs = new MemoryRegion[devices.length];
        RuntimeException[] errors = new RuntimeException[devices.length];
        if (devices.length == 1 || length < PARALLEL_MIN_BYTES) {
            for (int i = 0; i < devices.length; i++) {
                try {
                    mrs[i] = devices[i].register(address, length, access);
                } catch (RuntimeException e) {
                    errors[i] = e;
                    break;
                }
            }
        } else {
            List<Thread> helpers = new ArrayList<>(devices.length - 1);
            for (int i = 1; i < devices.length; i++) {
                int d = i;
                helpers.add(Thread.ofPlatform().daemon(true).name("mooncake-rdma-register-" + THREADS.getAndIncrement())
                        .start(() -> registerOne(devices, d, address, length, access, mrs, errors)));
            }
            registerOne(devices, 0, address, length, access, mrs, errors);
            boolean interrupted = false;
            for (Thread t : helpers) {
                while (true) {
                    try {
                        t.join();
                        break;
                    } catch (InterruptedException e) {
                        interrupted = true; // the helpers' regions must be accounted for before returning
                    }
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
        RuntimeException first = null;
        for (RuntimeException e : errors) {
            if (e != null && first == null) {
                first = e;
            }
        }
        if (first != null) {
            for (MemoryRegion mr : mrs) {
                if (mr != null) {
                    try {
                        mr.close();
                    } catch (RuntimeException e) {
                        LOG.warn("deregistering memory at 0x{} after a failed registration failed: {}",
                                Long.toHexString(address), e.getMessage());
                    }
                }
            }
            throw first;
        }
        return mrs;
    }

    private static void registerOne(Device[] devices, int i, long address, long length, int access,
            MemoryRegion[] mrs, RuntimeException[] errors) {
        try {
            mrs[i] = devices[i].register(address, length, access);
        } catch (RuntimeException e) {
            errors[i] = e;
        }
    }
}
