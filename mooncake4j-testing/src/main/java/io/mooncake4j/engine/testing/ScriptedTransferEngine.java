package io.mooncake4j.engine.testing;

import io.mooncake4j.engine.BufferRegistry;
import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.ToIntFunction;

/**
 * A scriptable, recording {@link TransferEngine} for unit tests, of this project and of
 * embedders. It opens no socket.
 *
 * <ul>
 *   <li><b>Recording:</b> every call is kept as an {@link EngineCall} with copies of its arrays
 *       and the code returned ({@link #calls()}); {@link #recordCalls(boolean) recordCalls(false)}
 *       keeps only the counts ({@link #callCount}), for an engine that serves traffic (the
 *       {@code mock} protocol of {@link io.mooncake4j.engine.TransferEngines}), whose log would
 *       otherwise grow with every transfer.</li>
 *   <li><b>Scripting:</b> {@link #script(EngineMethod)} decides what a method returns: succeed
 *       (default), always fail, fail the N-th call, fail the first N calls, or compute a code.
 *       A {@link #beforeEach hook} can block or count calls. The answers that are not return codes
 *       are scripted too: {@link #scriptDeviceMemoryAccess} (default {@link DeviceMemoryAccess#unknown()},
 *       so a worker with protocol tcp refuses GPU memory until a test says how the engine reaches it),
 *       {@link #scriptFirstBufferAddress} and {@link #scriptTransferStatus}.</li>
 *   <li><b>Registration</b> follows Mooncake's rules (overlap, zero length, unknown address) once
 *       the script lets a call through.</li>
 *   <li><b>Data:</b> with {@link #copyData(boolean) copyData(true)} transfers really copy bytes
 *       between engines of this JVM, looked up by segment name; the source must lie in memory
 *       registered with this engine and the destination in memory registered with the target,
 *       otherwise the transfer returns -1 and copies nothing. Without it, transfers copy nothing
 *       and return the scripted code (like vLLM's {@code FakeMooncakeWrapper}).</li>
 * </ul>
 *
 * <p>Thread-safe. {@link #close()} removes the engine from the in-JVM directory.
 */
public final class ScriptedTransferEngine implements TransferEngine {

    private static final AtomicInteger NEXT_PORT = new AtomicInteger(40000);
    private static final Map<String, ScriptedTransferEngine> DIRECTORY = new ConcurrentHashMap<>();

    /** What a scripted method returns. Configure through {@link ScriptedTransferEngine#script}. */
    public static final class Script {
        private ToIntFunction<EngineCall> rule = c -> 0;

        private Script() { // made by ScriptedTransferEngine only
        }

        /**
         * Every call succeeds (the default).
         *
         * @return this script
         */
        public Script succeed() {
            rule = c -> 0;
            return this;
        }

        /**
         * Every call returns {@code code}.
         *
         * @param code the return code
         * @return this script
         */
        public Script alwaysReturn(int code) {
            rule = c -> code;
            return this;
        }

        /**
         * Call number {@code n} (1-based) returns {@code code}; the others succeed.
         *
         * @param n    the 1-based call number
         * @param code the return code
         * @return this script
         */
        public Script failNthCall(int n, int code) {
            rule = c -> c.ordinal() == n ? code : 0;
            return this;
        }

        /**
         * The first {@code count} calls return {@code code}; later calls succeed.
         *
         * @param count the number of calls
         * @param code  the return code
         * @return this script
         */
        public Script failFirst(int count, int code) {
            rule = c -> c.ordinal() <= count ? code : 0;
            return this;
        }

        /**
         * The code is computed from the call (its ordinal and arguments).
         *
         * @param rule computes the code from the call
         * @return this script
         */
        public Script answer(ToIntFunction<EngineCall> rule) {
            this.rule = Objects.requireNonNull(rule);
            return this;
        }

        int apply(EngineCall c) {
            return rule.applyAsInt(c);
        }
    }

    private final Map<EngineMethod, Script> scripts = new EnumMap<>(EngineMethod.class);
    private final Map<EngineMethod, AtomicInteger> ordinals = new EnumMap<>(EngineMethod.class);
    /** Per method, the calls finished (recorded or, with recording off, counted); guarded by {@code calls}. */
    private final int[] finished = new int[EngineMethod.values().length];
    private final List<EngineCall> calls = new ArrayList<>();
    private volatile boolean recordCalls = true;
    private final BufferRegistry registry = new BufferRegistry();
    private volatile Consumer<EngineCall> beforeEach = c -> { };
    private volatile Function<String, DeviceMemoryAccess> deviceAccess = location -> DeviceMemoryAccess.unknown();
    private volatile FirstBufferRule firstBuffer = (segment, actual) -> actual;
    private volatile StatusRule statusRule = (batchId, taskIndex, actual) -> actual;
    private volatile boolean copyData;
    private volatile int rpcPort;
    private volatile String hostname;
    private volatile String protocol;
    private volatile boolean closed;

    private final Map<String, Long> segmentIds = new HashMap<>();
    private final Map<Long, String> segmentNames = new HashMap<>();
    private final AtomicLong nextSegmentId = new AtomicLong(1);
    private final Map<Long, Batch> batches = new ConcurrentHashMap<>();
    private final AtomicLong nextBatchId = new AtomicLong(1);

    private static final class Batch {
        final int capacity;
        final List<TransferStatus> results = new ArrayList<>();
        final List<Boolean> observed = new ArrayList<>();

        Batch(int capacity) {
            this.capacity = capacity;
        }
    }

    /** An engine with a unique RPC port, not yet initialised. */
    public ScriptedTransferEngine() {
        for (EngineMethod m : EngineMethod.values()) {
            scripts.put(m, new Script());
            ordinals.put(m, new AtomicInteger());
        }
        this.rpcPort = NEXT_PORT.getAndIncrement();
    }

    /**
     * {@return the script of one method, to configure}
     *
     * @param method the engine method
     */
    public Script script(EngineMethod method) {
        synchronized (scripts) {
            return scripts.get(method);
        }
    }

    /**
     * Runs {@code hook} before each call is decided (after its arguments are recorded): block, count, throw.
     *
     * @param hook called with each call
     * @return this engine
     */
    public ScriptedTransferEngine beforeEach(Consumer<EngineCall> hook) {
        this.beforeEach = Objects.requireNonNull(hook);
        return this;
    }

    /** Decides {@link #getFirstBufferAddress}: from the segment name and what this engine would answer. */
    @FunctionalInterface
    public interface FirstBufferRule {
        /**
         * The first buffer address to answer.
         *
         * @param segmentName the segment asked about
         * @param actual      what the in-JVM lookup found
         * @return the address to answer
         */
        long answer(String segmentName, long actual);
    }

    /** Decides {@link #getTransferStatus}: from the batch, the task and the status this engine recorded. */
    @FunctionalInterface
    public interface StatusRule {
        /**
         * The status to answer.
         *
         * @param batchId   the batch asked about
         * @param taskIndex the task asked about
         * @param actual    the status recorded at submission
         * @return the status to answer
         */
        TransferStatus answer(long batchId, int taskIndex, TransferStatus actual);
    }

    /**
     * What {@link #deviceMemoryAccess} answers for a location (default {@link DeviceMemoryAccess#unknown()}):
     * a test of a GPU-over-tcp server answers e.g. {@code l -> DeviceMemoryAccess.staged("test")}.
     *
     * @param answer how the engine reaches each GPU location
     * @return this engine
     */
    public ScriptedTransferEngine scriptDeviceMemoryAccess(Function<String, DeviceMemoryAccess> answer) {
        this.deviceAccess = Objects.requireNonNull(answer, "answer");
        return this;
    }

    /**
     * What {@link #getFirstBufferAddress} answers (default: the in-JVM lookup described there).
     *
     * @param rule computes the code from the call
     * @return this engine
     */
    public ScriptedTransferEngine scriptFirstBufferAddress(FirstBufferRule rule) {
        this.firstBuffer = Objects.requireNonNull(rule, "rule");
        return this;
    }

    /**
     * Scripts what {@link #getTransferStatus} answers (default: the status recorded at submission),
     * for example PENDING for the first polls.
     *
     * @param rule the status of a task from the recorded one
     * @return this engine
     */
    public ScriptedTransferEngine scriptTransferStatus(StatusRule rule) {
        this.statusRule = Objects.requireNonNull(rule, "rule");
        return this;
    }

    /**
     * Whether transfers copy bytes between in-JVM engines (see the class comment).
     *
     * @param copy whether transfers copy bytes between the engines of this JVM
     * @return this engine
     */
    public ScriptedTransferEngine copyData(boolean copy) {
        this.copyData = copy;
        return this;
    }

    /**
     * Whether each call is kept for {@link #calls()} (the default) or only counted for
     * {@link #callCount}. Off, the engine holds nothing per call, and the argument arrays a
     * {@link #beforeEach hook} or a script sees are the caller's own, valid during that call only.
     *
     * @param record whether calls are kept
     * @return this engine
     */
    public ScriptedTransferEngine recordCalls(boolean record) {
        this.recordCalls = record;
        return this;
    }

    /**
     * Overrides the RPC port reported by {@link #getRpcPort()} (vLLM's fake reports 12345).
     *
     * @param port the port to report
     * @return this engine
     */
    public ScriptedTransferEngine withRpcPort(int port) {
        if (hostname != null) {
            throw new IllegalStateException("set the port before initialize");
        }
        this.rpcPort = port;
        return this;
    }

    /** {@return every call so far, in order (none kept while {@link #recordCalls(boolean) recording} is off)} */
    public List<EngineCall> calls() {
        synchronized (calls) {
            return List.copyOf(calls);
        }
    }

    /**
     * {@return the calls of one method, in order}
     *
     * @param method the engine method
     */
    public List<EngineCall> calls(EngineMethod method) {
        synchronized (calls) {
            return calls.stream().filter(c -> c.method() == method).toList();
        }
    }

    /**
     * {@return how many times {@code method} was called}
     *
     * @param method the engine method
     */
    public int callCount(EngineMethod method) {
        synchronized (calls) {
            return finished[method.ordinal()];
        }
    }

    /** {@return the buffers currently registered} */
    public List<BufferRegistry.Buffer> registeredBuffers() {
        return registry.snapshot();
    }

    private int decide(EngineMethod m, Object... args) {
        int ordinal = ordinals.get(m).incrementAndGet();
        EngineCall probe = new EngineCall(m, ordinal, Arrays.asList(recordCalls ? copyArgs(args) : args), 0);
        beforeEach.accept(probe);
        Script s;
        synchronized (scripts) {
            s = scripts.get(m);
        }
        return s.apply(probe);
    }

    private void record(EngineMethod m, int result, Object... args) {
        boolean keep = recordCalls;
        Object[] copied = keep ? copyArgs(args) : null;
        synchronized (calls) {
            int ordinal = ++finished[m.ordinal()];
            if (keep) {
                calls.add(new EngineCall(m, ordinal, Arrays.asList(copied), result));
            }
        }
    }

    private static Object[] copyArgs(Object[] args) {
        Object[] out = args.clone();
        for (int i = 0; i < out.length; i++) {
            if (out[i] instanceof long[] l) {
                out[i] = l.clone();
            } else if (out[i] instanceof List<?> list) {
                out[i] = List.copyOf(list);
            }
        }
        return out;
    }

    private int finish(EngineMethod m, int code, Object... args) {
        record(m, code, args);
        return code;
    }

    @Override
    public int initialize(String localHostname, String metadataServer, String protocol, String deviceName) {
        int code = decide(EngineMethod.INITIALIZE, localHostname, metadataServer, protocol, deviceName);
        if (code == 0) {
            if (localHostname == null || localHostname.isEmpty()) {
                code = -1;
            } else {
                int colon = localHostname.lastIndexOf(':');
                String host = colon > 0 && localHostname.indexOf(':') == colon
                        ? localHostname.substring(0, colon) : localHostname;
                this.hostname = host;
                this.protocol = protocol;
                DIRECTORY.put(getLocalSegmentName(), this);
            }
        }
        return finish(EngineMethod.INITIALIZE, code, localHostname, metadataServer, protocol, deviceName);
    }

    @Override
    public int getRpcPort() {
        return rpcPort;
    }

    @Override
    public String getLocalSegmentName() {
        String h = hostname;
        return (h == null ? "127.0.0.1" : h) + ":" + rpcPort;
    }

    @Override
    public String protocol() {
        return protocol;
    }

    @Override
    public int registerMemory(long address, long length, String location) {
        int code = decide(EngineMethod.REGISTER_MEMORY, address, length, location);
        if (code == 0) {
            code = registry.register(address, length, location == null ? "*" : location);
        }
        return finish(EngineMethod.REGISTER_MEMORY, code, address, length, location);
    }

    /** The scripted answer ({@link #scriptDeviceMemoryAccess}); {@link DeviceMemoryAccess#unknown()} by default. */
    @Override
    public DeviceMemoryAccess deviceMemoryAccess(String location) {
        return Objects.requireNonNull(deviceAccess.apply(location), "scripted deviceMemoryAccess answered null");
    }

    @Override
    public int batchRegisterMemory(long[] addresses, long[] lengths) {
        int code = decide(EngineMethod.BATCH_REGISTER_MEMORY, addresses, lengths);
        if (code == 0) {
            if (addresses == null || lengths == null || addresses.length != lengths.length) {
                code = ErrorCodes.INVALID_ARGUMENT;
            } else {
                String[] locs = new String[addresses.length];
                Arrays.fill(locs, "*");
                code = registry.registerBatch(addresses, lengths, locs);
            }
        }
        return finish(EngineMethod.BATCH_REGISTER_MEMORY, code, addresses, lengths);
    }

    @Override
    public int unregisterMemory(long address) {
        int code = decide(EngineMethod.UNREGISTER_MEMORY, address);
        if (code == 0) {
            code = registry.unregister(address);
        }
        return finish(EngineMethod.UNREGISTER_MEMORY, code, address);
    }

    @Override
    public int batchUnregisterMemory(long[] addresses) {
        int code = decide(EngineMethod.BATCH_UNREGISTER_MEMORY, (Object) addresses);
        if (code == 0) {
            for (long a : addresses) {
                if (registry.byBase(a) == null) {
                    code = ErrorCodes.ADDRESS_NOT_REGISTERED;
                }
            }
            if (code == 0) {
                for (long a : addresses) {
                    registry.unregister(a);
                }
            }
        }
        return finish(EngineMethod.BATCH_UNREGISTER_MEMORY, code, (Object) addresses);
    }

    @Override
    public int batchTransferSyncWrite(String targetSession, long[] src, long[] dst, long[] lengths) {
        int code = decide(EngineMethod.BATCH_TRANSFER_SYNC_WRITE, targetSession, src, dst, lengths);
        if (code == 0) {
            code = move(targetSession, src, dst, lengths, true);
        }
        return finish(EngineMethod.BATCH_TRANSFER_SYNC_WRITE, code, targetSession, src, dst, lengths);
    }

    @Override
    public int batchTransferSyncRead(String targetSession, long[] local, long[] remote, long[] lengths) {
        int code = decide(EngineMethod.BATCH_TRANSFER_SYNC_READ, targetSession, local, remote, lengths);
        if (code == 0) {
            code = move(targetSession, local, remote, lengths, false);
        }
        return finish(EngineMethod.BATCH_TRANSFER_SYNC_READ, code, targetSession, local, remote, lengths);
    }

    /** Validates and (in copy mode) applies one batch; -1 on any problem, nothing copied then. */
    private int move(String target, long[] local, long[] remote, long[] lengths, boolean write) {
        if (closed || local == null || remote == null || lengths == null
                || local.length != remote.length || local.length != lengths.length) {
            return -1;
        }
        if (!copyData) {
            return 0;
        }
        ScriptedTransferEngine peer = DIRECTORY.get(target);
        if (peer == null || peer.closed) {
            return -1;
        }
        for (int i = 0; i < local.length; i++) {
            if (lengths[i] < 0 || registry.find(local[i], lengths[i]) == null
                    || peer.registry.find(remote[i], lengths[i]) == null) {
                return -1;
            }
        }
        for (int i = 0; i < local.length; i++) {
            if (lengths[i] == 0) {
                continue;
            }
            MemorySegment l = MemorySegment.ofAddress(local[i]).reinterpret(lengths[i]);
            MemorySegment r = MemorySegment.ofAddress(remote[i]).reinterpret(lengths[i]);
            if (write) {
                r.copyFrom(l);
            } else {
                l.copyFrom(r);
            }
        }
        return 0;
    }

    @Override
    public long openSegment(String segmentName) {
        int code = decide(EngineMethod.OPEN_SEGMENT, segmentName);
        long id;
        if (code != 0 || segmentName == null || segmentName.isEmpty()) {
            id = -1;
        } else if (segmentName.equals(getLocalSegmentName())) {
            id = 0;
        } else if (copyData && !DIRECTORY.containsKey(segmentName)) {
            id = -1;
        } else {
            synchronized (segmentIds) {
                id = segmentIds.computeIfAbsent(segmentName, n -> nextSegmentId.getAndIncrement());
                segmentNames.put(id, segmentName);
            }
        }
        record(EngineMethod.OPEN_SEGMENT, (int) id, segmentName);
        return id;
    }

    /**
     * In copy mode, the lowest-addressed buffer registered with the named engine of this JVM (the
     * registry keeps buffers sorted by address); -1 otherwise or when it has none.
     */
    @Override
    public long getFirstBufferAddress(String segmentName) {
        return firstBuffer.answer(segmentName, firstBufferInJvm(segmentName));
    }

    private long firstBufferInJvm(String segmentName) {
        ScriptedTransferEngine peer = segmentName == null ? null
                : segmentName.equals(getLocalSegmentName()) ? this : DIRECTORY.get(segmentName);
        if (!copyData || peer == null || peer.closed) {
            return -1;
        }
        List<BufferRegistry.Buffer> buffers = peer.registry.snapshot();
        return buffers.isEmpty() ? -1 : buffers.get(0).address();
    }

    @Override
    public long allocateBatchId(int capacity) {
        int code = decide(EngineMethod.ALLOCATE_BATCH_ID, capacity);
        long id = -1;
        if (code == 0 && capacity > 0) {
            id = nextBatchId.getAndIncrement();
            batches.put(id, new Batch(capacity));
        } else if (code != 0) {
            id = code < 0 ? code : -code;
        }
        record(EngineMethod.ALLOCATE_BATCH_ID, (int) id, capacity);
        return id;
    }

    @Override
    public int submitTransfer(long batchId, List<TransferRequest> requests) {
        int code = decide(EngineMethod.SUBMIT_TRANSFER, batchId, requests);
        Batch b = batches.get(batchId);
        if (code == 0) {
            if (b == null || requests == null) {
                code = StatusCodes.INVALID_ARGUMENT;
            } else {
                synchronized (b) {
                    if (b.results.size() + requests.size() > b.capacity) {
                        code = StatusCodes.TOO_MANY_REQUESTS;
                    } else {
                        for (TransferRequest r : requests) {
                            String target;
                            if (r.targetId() == 0) {
                                target = getLocalSegmentName();
                            } else {
                                synchronized (segmentIds) {
                                    target = segmentNames.get(r.targetId());
                                }
                            }
                            if (target == null) {
                                code = StatusCodes.INVALID_ARGUMENT;
                                break;
                            }
                        }
                        if (code == 0) {
                            for (TransferRequest r : requests) {
                                String target = r.targetId() == 0 ? getLocalSegmentName() : segmentNameOf(r.targetId());
                                int rc = move(target, new long[] {r.source()}, new long[] {r.targetOffset()},
                                        new long[] {r.length()}, r.opcode() == TransferRequest.Opcode.WRITE);
                                b.results.add(new TransferStatus(0, rc == 0 ? TransferStatus.State.COMPLETED
                                        : TransferStatus.State.FAILED, rc == 0 ? r.length() : 0));
                                b.observed.add(false);
                            }
                        }
                    }
                }
            }
        }
        return finish(EngineMethod.SUBMIT_TRANSFER, code, batchId, requests);
    }

    private String segmentNameOf(long id) {
        synchronized (segmentIds) {
            return segmentNames.get(id);
        }
    }

    @Override
    public TransferStatus getTransferStatus(long batchId, int taskIndex) {
        return Objects.requireNonNull(statusRule.answer(batchId, taskIndex, recordedStatus(batchId, taskIndex)),
                "scripted getTransferStatus answered null");
    }

    private TransferStatus recordedStatus(long batchId, int taskIndex) {
        Batch b = batches.get(batchId);
        if (b == null) {
            return TransferStatus.invalid(StatusCodes.INVALID_ARGUMENT);
        }
        synchronized (b) {
            if (taskIndex < 0 || taskIndex >= b.results.size()) {
                return TransferStatus.invalid(StatusCodes.INVALID_ARGUMENT);
            }
            b.observed.set(taskIndex, true);
            return b.results.get(taskIndex);
        }
    }

    @Override
    public int freeBatchId(long batchId) {
        int code = decide(EngineMethod.FREE_BATCH_ID, batchId);
        if (code == 0) {
            Batch b = batches.get(batchId);
            if (b == null) {
                code = StatusCodes.INVALID_ARGUMENT;
            } else {
                synchronized (b) {
                    if (b.observed.contains(false)) {
                        code = StatusCodes.BATCH_BUSY;
                    } else {
                        batches.remove(batchId);
                    }
                }
            }
        }
        return finish(EngineMethod.FREE_BATCH_ID, code, batchId);
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        DIRECTORY.remove(getLocalSegmentName(), this);
    }

    /** {@return whether {@link #close()} was called} */
    public boolean isClosed() {
        return closed;
    }
}
