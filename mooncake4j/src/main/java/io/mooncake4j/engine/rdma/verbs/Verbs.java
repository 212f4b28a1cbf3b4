package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The raw downcall handles into {@code libibverbs.so.1}. Class initialisation never fails: a
 * missing library, a missing required symbol or disabled native access is recorded in
 * {@link #UNAVAILABLE} and every handle is then {@code null}; optional symbols
 * ({@code ibv_reg_mr_iova2}, {@code ibv_reg_dmabuf_mr}, {@code _ibv_query_gid_ex}) are recorded
 * as capabilities.
 *
 * <p>Pointer-returning functions are linked with {@code captureCallState("errno")}: their first
 * argument is a capture segment the caller allocates (per call, so per thread). Functions whose
 * man page says they return an errno value are linked without capture.
 *
 * <p>{@code ibv_post_send}, {@code ibv_post_recv}, {@code ibv_poll_cq} and
 * {@code ibv_req_notify_cq} are {@code static inline} in {@code verbs.h}; their handles take the
 * function pointer read from {@code ibv_context.ops} as first argument.
 */
@SuppressWarnings("restricted") // deliberate FFM: native pointers are sized with reinterpret, handles linked here
final class Verbs {

    private Verbs() {}

    static final String LIBRARY = "libibverbs.so.1";

    /** Linux errno values (asm-generic/errno-base.h, errno.h; same on x86-64 and aarch64). */
    static final int EPERM = 1, ENOENT = 2, EIO = 5, EAGAIN = 11, ENOMEM = 12, EACCES = 13,
            EFAULT = 14, EBUSY = 16, ENODEV = 19, EINVAL = 22, ENOSYS = 38, EOPNOTSUPP = 95,
            ETIMEDOUT = 110;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");
    static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    static final boolean NATIVE_ACCESS_ENABLED = Verbs.class.getModule().isNativeAccessEnabled();
    private static final List<String> MISSING = new ArrayList<>();
    private static final String LIBRARY_FAILURE;
    private static final SymbolLookup LIB;

    static {
        SymbolLookup lib = null;
        String failure = null;
        if (!NATIVE_ACCESS_ENABLED) {
            failure = "native access is not enabled for " + describeModule();
        } else {
            try {
                lib = SymbolLookup.libraryLookup(LIBRARY, Arena.global());
            } catch (IllegalArgumentException e) { // library not found or not loadable
                failure = LIBRARY + " could not be loaded: " + e.getMessage();
            } catch (IllegalCallerException e) { // --illegal-native-access=deny
                failure = "native access denied: " + e.getMessage();
            }
        }
        LIB = lib;
        LIBRARY_FAILURE = failure;
    }

    // struct ibv_device **ibv_get_device_list(int *num_devices);             sets errno
    static final MethodHandle GET_DEVICE_LIST = required("ibv_get_device_list", true, FunctionDescriptor.of(ADDRESS, ADDRESS));
    // void ibv_free_device_list(struct ibv_device **list);
    static final MethodHandle FREE_DEVICE_LIST = required("ibv_free_device_list", false, FunctionDescriptor.ofVoid(ADDRESS));
    // const char *ibv_get_device_name(struct ibv_device *device);
    static final MethodHandle GET_DEVICE_NAME = required("ibv_get_device_name", false, FunctionDescriptor.of(ADDRESS, ADDRESS));
    // __be64 ibv_get_device_guid(struct ibv_device *device);
    static final MethodHandle GET_DEVICE_GUID = required("ibv_get_device_guid", false, FunctionDescriptor.of(JAVA_LONG, ADDRESS));
    // struct ibv_context *ibv_open_device(struct ibv_device *device);        NULL on failure
    static final MethodHandle OPEN_DEVICE = required("ibv_open_device", true, FunctionDescriptor.of(ADDRESS, ADDRESS));
    // int ibv_close_device(struct ibv_context *context);                     0 or -1
    static final MethodHandle CLOSE_DEVICE = required("ibv_close_device", false, FunctionDescriptor.of(JAVA_INT, ADDRESS));
    // int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr);  errno value
    static final MethodHandle QUERY_DEVICE = required("ibv_query_device", false, FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    // int ibv_query_port(struct ibv_context *, uint8_t port_num, struct _compat_ibv_port_attr *);  errno value
    // (the exported symbol behind the verbs.h macro; fills ibv_port_attr up to 'flags')
    static final MethodHandle QUERY_PORT = required("ibv_query_port", false, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_BYTE, ADDRESS));
    // int ibv_query_gid(struct ibv_context *, uint8_t port_num, int index, union ibv_gid *gid);  0 or -1
    static final MethodHandle QUERY_GID = required("ibv_query_gid", false, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_BYTE, JAVA_INT, ADDRESS));
    // int _ibv_query_gid_ex(struct ibv_context *, uint32_t port_num, uint32_t gid_index,
    //                       struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size);  errno value
    static final MethodHandle QUERY_GID_EX = optional("_ibv_query_gid_ex", false,
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG));
    // struct ibv_pd *ibv_alloc_pd(struct ibv_context *context);              NULL on failure
    static final MethodHandle ALLOC_PD = required("ibv_alloc_pd", true, FunctionDescriptor.of(ADDRESS, ADDRESS));
    // int ibv_dealloc_pd(struct ibv_pd *pd);                                  errno value
    static final MethodHandle DEALLOC_PD = required("ibv_dealloc_pd", false, FunctionDescriptor.of(JAVA_INT, ADDRESS));
    // struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);  NULL on failure
    static final MethodHandle REG_MR = required("ibv_reg_mr", true, FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT));
    // struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
    //                                 unsigned int access);                  NULL on failure
    static final MethodHandle REG_MR_IOVA2 = optional("ibv_reg_mr_iova2", true,
            FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT));
    // struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
    //                                  uint64_t iova, int fd, int access);   NULL on failure
    static final MethodHandle REG_DMABUF_MR = optional("ibv_reg_dmabuf_mr", true,
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT));
    // int ibv_dereg_mr(struct ibv_mr *mr);                                    errno value
    static final MethodHandle DEREG_MR = required("ibv_dereg_mr", false, FunctionDescriptor.of(JAVA_INT, ADDRESS));
    // struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
    //                              struct ibv_comp_channel *channel, int comp_vector);  NULL on failure
    static final MethodHandle CREATE_CQ = required("ibv_create_cq", true,
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
    // int ibv_destroy_cq(struct ibv_cq *cq);                                  errno value
    static final MethodHandle DESTROY_CQ = required("ibv_destroy_cq", false, FunctionDescriptor.of(JAVA_INT, ADDRESS));
    // struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr);  NULL on failure
    static final MethodHandle CREATE_QP = required("ibv_create_qp", true, FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
    // int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);  errno value
    static final MethodHandle MODIFY_QP = required("ibv_modify_qp", false, FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
    // int ibv_destroy_qp(struct ibv_qp *qp);                                  errno value
    static final MethodHandle DESTROY_QP = required("ibv_destroy_qp", false, FunctionDescriptor.of(JAVA_INT, ADDRESS));

    // int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event);  0 or -1
    static final MethodHandle GET_ASYNC_EVENT = required("ibv_get_async_event", false,
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    // void ibv_ack_async_event(struct ibv_async_event *event);
    static final MethodHandle ACK_ASYNC_EVENT = required("ibv_ack_async_event", false,
            FunctionDescriptor.ofVoid(ADDRESS));
    // int poll(struct pollfd *fds, nfds_t nfds, int timeout);  (libc) the async fd is waited on with a timeout,
    // so the reader thread can stop; ibv_get_async_event then does not block
    static final MethodHandle POLL = libc("poll", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));

    // Through ibv_context.ops (first argument: the function pointer).
    // int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);  errno value
    // post_send and poll_cq never block (they write a doorbell / read CQEs in user space), so they are linked
    // critical: no thread-state transition per call; the GC waits at most for the call to return
    static final MethodHandle POST_SEND = criticalPointer(FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
    // int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);  errno value
    static final MethodHandle POST_RECV = pointer(FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
    // int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);   >= 0 count, < 0 failure
    static final MethodHandle POLL_CQ = criticalPointer(FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS));
    // int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);            errno value
    static final MethodHandle REQ_NOTIFY_CQ = pointer(FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));

    /** Why the bindings cannot be used, or {@code null} when they can. Declared after the handles. */
    static final String UNAVAILABLE = LIBRARY_FAILURE != null ? LIBRARY_FAILURE
            : MISSING.isEmpty() ? null
            : LIBRARY + " lacks required symbols " + MISSING + " (rdma-core too old?)";

    static final boolean HAS_REG_MR_IOVA2 = UNAVAILABLE == null && REG_MR_IOVA2 != null;
    static final boolean HAS_REG_DMABUF_MR = UNAVAILABLE == null && REG_DMABUF_MR != null;
    static final boolean HAS_QUERY_GID_EX = UNAVAILABLE == null && QUERY_GID_EX != null;

    static Optional<String> unavailable() {
        return Optional.ofNullable(UNAVAILABLE);
    }

    /** Throws when the bindings are unusable; call before any handle. */
    static void requireAvailable() {
        if (UNAVAILABLE != null) {
            throw new VerbsException("libibverbs", 0, UNAVAILABLE);
        }
    }

    /** Reads {@code errno} from a capture segment filled by a downcall. */
    static int errno(MemorySegment capture) {
        return (int) ERRNO.get(capture, 0L);
    }

    private static MethodHandle required(String name, boolean captureErrno, FunctionDescriptor fd) {
        MethodHandle h = optional(name, captureErrno, fd);
        if (h == null && LIB != null) {
            MISSING.add(name);
        }
        return h;
    }

    private static MethodHandle optional(String name, boolean captureErrno, FunctionDescriptor fd) {
        if (LIB == null) {
            return null;
        }
        Optional<MemorySegment> symbol = LIB.find(name);
        if (symbol.isEmpty()) {
            return null;
        }
        return captureErrno
                ? LINKER.downcallHandle(symbol.get(), fd, CAPTURE_ERRNO)
                : LINKER.downcallHandle(symbol.get(), fd);
    }

    private static MethodHandle libc(String name, FunctionDescriptor fd) {
        if (LIB == null) {
            return null;
        }
        try {
            return LINKER.defaultLookup().find(name).map(a -> LINKER.downcallHandle(a, fd)).orElse(null);
        } catch (RuntimeException e) { // no native access in this mode: recorded as unavailable, never thrown here
            return null;
        }
    }

    private static MethodHandle criticalPointer(FunctionDescriptor fd) {
        return LIB == null ? null : LINKER.downcallHandle(fd, Linker.Option.critical(false));
    }

    private static MethodHandle pointer(FunctionDescriptor fd) {
        return LIB == null ? null : LINKER.downcallHandle(fd);
    }

    private static String describeModule() {
        Module m = Verbs.class.getModule();
        return m.isNamed()
                ? "module " + m.getName() + " (add --enable-native-access=" + m.getName() + ")"
                : "the class path (add --enable-native-access=ALL-UNNAMED)";
    }
}
