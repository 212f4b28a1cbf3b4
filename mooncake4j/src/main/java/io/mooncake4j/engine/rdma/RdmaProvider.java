package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.rdma.verbs.AsyncEvent;
import io.mooncake4j.engine.rdma.verbs.DeviceAttributes;
import io.mooncake4j.engine.rdma.verbs.Gid;
import io.mooncake4j.engine.rdma.verbs.GidEntry;
import io.mooncake4j.engine.rdma.verbs.PortAttributes;
import io.mooncake4j.engine.rdma.verbs.QpCapabilities;
import io.mooncake4j.engine.rdma.verbs.RtrAttributes;
import io.mooncake4j.engine.rdma.verbs.RtsAttributes;
import io.mooncake4j.engine.rdma.verbs.SendWorkRequests;
import io.mooncake4j.engine.rdma.verbs.VerbsException;
import io.mooncake4j.engine.rdma.verbs.WorkCompletions;
import java.util.List;

/**
 * The verbs surface the RDMA transport is written against: libibverbs in production
 * ({@link VerbsRdmaProvider}), an in-memory emulation in tests. Control-path methods throw
 * {@link io.mooncake4j.engine.rdma.verbs.VerbsException}; {@code postSend} and {@code poll}
 * return verbs return codes.
 */
public interface RdmaProvider {

    /** Names of the RDMA devices present ({@code ibv_get_device_list}). */
    List<String> deviceNames();

    /** Opens a device: {@code ibv_open_device} plus one protection domain. */
    Device open(String name);

    /**
     * Whether {@link Device#registerDmabuf} may be tried: the library has
     * {@code ibv_reg_dmabuf_mr} (rdma-core 34+). A device's driver may still refuse it
     * ({@code EOPNOTSUPP}). False unless the provider says otherwise.
     */
    default boolean supportsDmabuf() {
        return false;
    }

    /** An open device with its protection domain; closing it tears down QPs, CQs, MRs, PD, context in that order. */
    interface Device extends AutoCloseable {
        String name();

        DeviceAttributes attributes();

        PortAttributes port(int port);

        Gid gid(int port, int index);

        /** {@code ibv_query_gid_ex}: the GID with its type and netdev index (for automatic selection). */
        GidEntry gidEntry(int port, int index);

        MemoryRegion register(long address, long length, int access);

        /**
         * {@code ibv_reg_dmabuf_mr}: registers {@code length} bytes at {@code offset} within the
         * dma-buf {@code fd}, addressed as {@code iova} in work requests (GPUDirect RDMA without
         * peer-memory modules). The region's {@link MemoryRegion#address()} is {@code iova}. The
         * caller may close {@code fd} afterwards. Throws {@code VerbsException} ({@code EOPNOTSUPP}
         * where the provider cannot).
         */
        default MemoryRegion registerDmabuf(long offset, long length, long iova, int fd, int access) {
            throw new VerbsException("ibv_reg_dmabuf_mr", 95,
                    "not supported by this provider");
        }

        CompletionQueue createCq(int cqe);

        /** Whether {@link #nextAsyncEvent} reports this device's asynchronous events. */
        default boolean hasAsyncEvents() {
            return false;
        }

        /**
         * The next asynchronous event ({@code ibv_get_async_event}, already acknowledged), waiting
         * at most {@code timeoutMs}; null when none came. Called by one thread at a time, never
         * after {@link #close} has started.
         */
        default AsyncEvent nextAsyncEvent(int timeoutMs) {
            return null;
        }

        QueuePair createRcQp(CompletionQueue cq, QpCapabilities caps);

        @Override
        void close();
    }

    /** A registered memory region. */
    interface MemoryRegion extends AutoCloseable {
        long address();

        long length();

        int lkey();

        int rkey();

        @Override
        void close();
    }

    /** A completion queue; one owner thread polls it. */
    interface CompletionQueue extends AutoCloseable {
        /** Completions written into {@code wc}, or a negative value on failure. */
        int poll(WorkCompletions wc);

        @Override
        void close();
    }

    /** An RC queue pair; one owner thread posts to it. */
    interface QueuePair extends AutoCloseable {
        int qpNum();

        /** {@code enum ibv_qp_state} as last set. */
        int state();

        void modifyToInit(int portNum, int pkeyIndex, int accessFlags);

        void modifyToRtr(RtrAttributes attributes);

        void modifyToRts(RtsAttributes attributes);

        void modifyToError();

        /** Posts the chain starting at request {@code first}: 0 or an errno value. */
        int postSend(SendWorkRequests wrs, int first);

        @Override
        void close();
    }
}
