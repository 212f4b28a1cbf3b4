package io.mooncake4j.store;

import io.mooncake4j.store.MasterCodec.Rpc;
import io.mooncake4j.store.wire.SpType;
import io.mooncake4j.store.wire.StructPack;
import io.mooncake4j.store.wire.StructPackException;
import io.mooncake4j.store.wire.StructPackWriter;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * An in-memory {@code mooncake_master} on a loopback port for tests: it speaks the real wire
 * (coro_rpc frames with struct_pack bodies, decoded with the client's own types) through a real
 * socket, and keeps the master's state: clients and their segments (MountSegment, ReMountSegment,
 * UnmountSegment), objects whose replicas are placed in mounted segments (PutStart/End/Revoke and
 * the batch forms, Upsert*), reads that grant leases (GetReplicaList, and ExistKey on a hit), Remove, RemoveAll,
 * RemoveByRegex, and liveness (Ping answers NEED_REMOUNT for a client it does not know; a client
 * silent for longer than the client TTL is expired with its segments and the objects in them).
 * Values live in the segment owners' memory, as with the real master: the fake only hands out
 * addresses.
 *
 * <p>Fault hooks: {@link #silent} (read requests, answer nothing, keep the connection), {@link #fault}
 * (answer chosen requests with any bytes: malformed bodies, error frames, a close), {@link #failKey}
 * (a per-key error code in every key operation), {@link #expireClient} and {@link #restart}.
 *
 * <p>The scripted form ({@link #FakeMaster(Script)}) answers every request with the script's bytes,
 * for the wire-level bad-reply tests. Public, and shipped in this module's test-jar, for other
 * modules' tests. Thread-safe; one thread per connection.
 */
public final class FakeMaster implements AutoCloseable {

    /** One request as received. */
    public record Request(int seq, int functionId, byte[] body, int connection) {

        /** {@return the RPC's name, or null for a function the fake does not know} */
        public String rpcName() {
            Rpc r = RPCS.get(functionId);
            return r == null ? null : r.name();
        }
    }

    /** What to write for a request: raw bytes (possibly several frames, possibly garbage); null closes. */
    public interface Script {
        /**
         * {@return the bytes to write, or null to close the connection}
         *
         * @param r the request
         * @throws IOException to close the connection
         */
        byte[] answer(Request r) throws IOException;
    }

    /**
     * A fault injected in front of the functional master: return null to let the master answer,
     * {@link #NO_ANSWER} to answer nothing, {@link #CLOSE} to close the connection, or any bytes to
     * write instead of the answer.
     */
    public interface Fault {
        /**
         * {@return the bytes to write instead, or null for the normal answer}
         *
         * @param r the request
         */
        byte[] intercept(Request r);
    }

    /** A {@link Fault}'s answer: write nothing for this request. */
    public static final byte[] NO_ANSWER = new byte[0];
    /** A {@link Fault}'s answer: close this connection. */
    public static final byte[] CLOSE = new byte[0];

    /** Every RPC the fake serves, by function id. */
    static final Map<Integer, Rpc> RPCS = new HashMap<>();

    static {
        for (Rpc r : MasterCodec.ALL) {
            RPCS.put(r.id(), r);
        }
        for (Rpc r : MasterCodec.EXTRA) {
            RPCS.put(r.id(), r);
        }
    }

    private final ServerSocket server;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private final AtomicInteger connections = new AtomicInteger();
    private final Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();
    private volatile Script script;
    private volatile Fault fault;
    private volatile boolean silent;
    /** The master's state and its answers (the functional master). */
    private final MasterState state = new MasterState();

    // ------------------------------------------------------------------ construction

    /**
     * A functional master on a loopback port (random placement seeded with 1).
     *
     * @throws IOException when no port can be bound
     */
    public FakeMaster() throws IOException {
        this(null);
    }

    /**
     * A scripted server: every request is answered with the script's bytes.
     *
     * @param script the answers, or null for the functional master
     * @throws IOException when no port can be bound
     */
    public FakeMaster(Script script) throws IOException {
        this.script = script;
        server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread t = new Thread(this::acceptLoop, "fake-master");
        t.setDaemon(true);
        t.start();
    }

    /**
     * Replaces the script (null: the functional master answers).
     *
     * @param s the script
     */
    public void script(Script s) {
        script = s;
    }

    /** {@return the RPC address} */
    public InetSocketAddress address() {
        return new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort());
    }

    /** {@return the RPC address as "host:port"} */
    public String hostPort() {
        return address().getHostString() + ":" + address().getPort();
    }

    /** {@return connections accepted so far} */
    public int connections() {
        return connections.get();
    }

    /**
     * {@return how many requests of an RPC arrived (answered or not)}
     *
     * @param rpcName the RPC's name, e.g. "PutStart"
     */
    public int calls(String rpcName) {
        AtomicInteger n = calls.get(rpcName);
        return n == null ? 0 : n.get();
    }

    // ------------------------------------------------------------------ settings and fault hooks

    /**
     * Sets the read lease GetReplicaList grants ({@code --default_kv_lease_ttl}; 10 s).
     *
     * @param ttl the lease
     * @return this
     */
    public FakeMaster leaseTtl(Duration ttl) {
        state.leaseTtlMs = ttl.toMillis();
        return this;
    }

    /**
     * Sets how long a client may stay silent before it is expired ({@code --client_ttl}; 10 s).
     *
     * @param ttl the client TTL
     * @return this
     */
    public FakeMaster clientTtl(Duration ttl) {
        state.clientTtlNanos = ttl.toNanos();
        return this;
    }

    /**
     * While true the master reads requests and answers none; connections stay open.
     *
     * @param on whether to go silent
     */
    public void silent(boolean on) {
        silent = on;
    }

    /**
     * Installs a fault in front of the master (null removes it).
     *
     * @param f the fault
     */
    public void fault(Fault f) {
        fault = f;
    }

    /**
     * Makes every key operation on {@code key} answer {@code code} for that key (0 clears).
     *
     * @param key  the key
     * @param code the error code
     */
    public void failKey(String key, ErrorCode code) {
        if (code == ErrorCode.OK) {
            state.keyErrors.remove(key);
        } else {
            state.keyErrors.put(key, code.code());
        }
    }

    /**
     * Expires a client now, as its TTL running out would: its segments are unmounted and the
     * objects with replicas in them dropped; its next Ping is answered NEED_REMOUNT.
     *
     * @param id the client
     * @return whether the master knew the client
     */
    public boolean expireClient(Uuid id) {
        return state.expireClient(id);
    }

    /** Forgets everything, as a restarted master: clients, segments, objects; a new view version. */
    public void restart() {
        state.restart();
    }

    // ------------------------------------------------------------------ observation

    /** {@return the keys of complete objects, in put order} */
    public List<String> keys() {
        return state.keys();
    }

    /**
     * {@return whether the master holds a complete object under {@code key}}
     *
     * @param key the key
     */
    public boolean holds(String key) {
        return state.holds(key);
    }

    /**
     * {@return the names of the segments holding {@code key}'s replicas (empty if none)}
     *
     * @param key the key
     */
    public List<String> placement(String key) {
        return state.placement(key);
    }

    /** {@return the mounted segments} */
    public List<Segment> mounted() {
        return state.mounted();
    }

    /**
     * {@return whether the master counts {@code id} as a live client}
     *
     * @param id the client
     */
    public boolean knows(Uuid id) {
        return state.knows(id);
    }

    // ------------------------------------------------------------------ serving

    private void acceptLoop() {
        while (!server.isClosed()) {
            try {
                Socket s = server.accept();
                // as coro_rpc's server does: pipelined answers go out at once, not after the peer's delayed ACK
                s.setTcpNoDelay(true);
                sockets.add(s);
                int id = connections.incrementAndGet();
                Thread t = new Thread(() -> serve(s, id), "fake-master-conn");
                t.setDaemon(true);
                t.start();
            } catch (IOException e) {
                return;
            }
        }
    }

    private void serve(Socket s, int id) {
        try (s) {
            DataInputStream in = new DataInputStream(s.getInputStream());
            OutputStream out = s.getOutputStream();
            byte[] head = new byte[20];
            while (true) {
                in.readFully(head);
                int seq = le(head, 4);
                int fid = le(head, 8);
                int length = le(head, 12);
                if (length < 0 || length > (64 << 20)) {
                    return;
                }
                byte[] body = new byte[length];
                in.readFully(body);
                Request r = new Request(seq, fid, body, id);
                String name = r.rpcName();
                calls.computeIfAbsent(name == null ? "?" + fid : name, k -> new AtomicInteger()).incrementAndGet();
                byte[] answer;
                Script sc = script;
                if (sc != null) {
                    answer = sc.answer(r);
                    if (answer == null) {
                        return;
                    }
                } else {
                    if (silent) {
                        continue;
                    }
                    Fault f = fault;
                    answer = f == null ? null : f.intercept(r);
                    if (answer == CLOSE) {
                        return;
                    }
                    if (answer == NO_ANSWER) {
                        continue;
                    }
                    if (answer == null) {
                        answer = handle(r);
                    }
                    if (silent) {
                        continue;
                    }
                }
                out.write(answer);
                out.flush();
                if (CLOSE_AFTER.contains(answer)) {
                    return;
                }
            }
        } catch (IOException e) {
            // the client closed or the script ended the connection
        }
    }

    /** The functional master: decode, apply, encode; an undecodable request gets coro_rpc's error frame. */
    private byte[] handle(Request q) {
        Rpc rpc = RPCS.get(q.functionId());
        if (rpc == null) {
            return errorFrame(q.seq(), 2, "function not registered");
        }
        try {
            Consumer<StructPackWriter> body = rpc.args() == null ? state.apply(rpc, null)
                    : StructPack.decode(q.body(), rpc.args(), r -> state.apply(rpc, r));
            return reply(q.seq(), 0, StructPack.encode(rpc.result(), body));
        } catch (StructPackException e) {
            return errorFrame(q.seq(), 4, "invalid rpc arg: " + e.getMessage());
        }
    }

    private static byte[] errorFrame(int seq, int err, String message) {
        return reply(seq, err, StructPack.encode(SpType.STRING, w -> w.string(message)));
    }
    // ------------------------------------------------------------------ frames

    private static final Set<byte[]> CLOSE_AFTER = Collections.synchronizedSet(Collections.newSetFromMap(new IdentityHashMap<>()));

    /**
     * {@return {@code bytes}, marked so that the server closes the connection after writing them}
     *
     * @param bytes the answer
     */
    public static byte[] thenClose(byte[] bytes) {
        CLOSE_AFTER.add(bytes);
        return bytes;
    }

    static int le(byte[] b, int off) {
        return (b[off] & 0xff) | (b[off + 1] & 0xff) << 8 | (b[off + 2] & 0xff) << 16 | (b[off + 3] & 0xff) << 24;
    }

    /**
     * {@return a reply frame: header (magic 21, version 0, err, seq, length) and body}
     *
     * @param seq  the request's sequence number
     * @param err  coro_rpc's error code (0 for a normal answer)
     * @param body the struct_pack body
     */
    public static byte[] reply(int seq, int err, byte[] body) {
        byte[] f = new byte[16 + body.length];
        f[0] = 21;
        f[2] = (byte) err;
        put(f, 4, seq);
        put(f, 8, body.length);
        System.arraycopy(body, 0, f, 16, body.length);
        return f;
    }

    /**
     * {@return a reply frame for {@code r} whose body is bytes no decoder accepts (a wrong type hash)}
     *
     * @param r the request
     */
    public static byte[] malformed(Request r) {
        return reply(r.seq(), 0, "not struct_pack".getBytes(StandardCharsets.US_ASCII));
    }

    static void put(byte[] b, int off, int v) {
        for (int i = 0; i < 4; i++) {
            b[off + i] = (byte) (v >>> (8 * i));
        }
    }

    static byte[] concat(byte[]... parts) {
        int n = 0;
        for (byte[] p : parts) {
            n += p.length;
        }
        byte[] out = new byte[n];
        int o = 0;
        for (byte[] p : parts) {
            System.arraycopy(p, 0, out, o, p.length);
            o += p.length;
        }
        return out;
    }

    @Override
    public void close() throws IOException {
        server.close();
        for (Socket s : sockets) {
            s.close();
        }
    }
}
