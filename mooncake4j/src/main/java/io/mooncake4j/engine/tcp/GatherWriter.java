package io.mooncake4j.engine.tcp;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.VarHandle;
import java.nio.channels.SocketChannel;
import java.util.Locale;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Gathering socket writes without allocation: a list of (address, length) pieces of native memory
 * (headers in a direct staging buffer, bodies straight from registered memory) sent with
 * {@code sendmsg(2)} through FFM, so that several requests with their bodies leave in one system
 * call and no body byte is copied in user space.
 *
 * <p>NIO's own gathering write ({@code SocketChannel.write(ByteBuffer[])}) would do the same but
 * allocates 40 B per memory-segment view per call, and a view per piece would be needed. So this
 * class writes on its own duplicate ({@code dup(2)}) of the channel's descriptor: the duplicate is
 * this writer's, closed only by its owner, so a close of the channel by another thread (a kill, an
 * abort, the reaper) can never let a write reach a reused descriptor number. Whoever closes such a
 * channel from another thread shuts it down first ({@code shutdownOutput}/{@code shutdownInput}),
 * which ends a write blocked on the duplicate; the socket itself closes when the owner
 * {@link #unbind() unbinds}. {@code MSG_NOSIGNAL} keeps a write to a reset connection from raising
 * {@code SIGPIPE}.
 *
 * <p>Reading the channel's descriptor number needs {@code java.base} to export {@code sun.nio.ch}
 * to this code ({@code --add-exports java.base/sun.nio.ch=ALL-UNNAMED} on the class path, or
 * {@code =io.mooncake4j} on the module path; {@code bin/mooncake4j} passes it). Without it, or off
 * Linux, or without native access, {@link #unavailableReason()} says why and callers fall back to
 * one NIO write per header run and per body.
 *
 * <p>Not thread-safe: one owner at a time (a lane's sender thread; the data-port session holding
 * a set of pooled buffers). The native memory (1.1 KiB) is freed with the writer.
 */
@SuppressWarnings("restricted") // native access is enabled wherever the data path runs
final class GatherWriter implements AutoCloseable {

    /** Pieces one call can carry (well under {@code IOV_MAX}, 1024). */
    static final int MAX_PIECES = 64;

    private static final Logger LOG = LoggerFactory.getLogger(GatherWriter.class);
    private static final int MSG_NOSIGNAL = 0x4000;
    private static final int EINTR = 4;
    private static final int EAGAIN = 11;
    private static final long MSGHDR_BYTES = 56; // struct msghdr on LP64 Linux
    private static final long MSG_IOV = 16;
    private static final long MSG_IOVLEN = 24;
    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    private static final Native N = Native.link();

    private final Arena arena = Arena.ofAuto(); // freed with the writer: no close can race a write
    private final MemorySegment iov = arena.allocate(16L * MAX_PIECES, 8);
    private final MemorySegment msg = arena.allocate(MSGHDR_BYTES, 8);
    private final MemorySegment state = arena.allocate(CALL_STATE);
    private int count;
    /** First piece not yet completely written. */
    private int first;
    private long bytes;
    private SocketChannel boundTo;
    private int fd = -1;

    private record Native(MethodHandle sendmsg, MethodHandle dup, MethodHandle close, MethodHandle fdVal,
            String unavailable) {

        static Native link() {
            if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")
                    || !"64".equals(System.getProperty("sun.arch.data.model", "64"))) {
                return off("gathering writes need 64-bit Linux");
            }
            MethodHandle fdVal;
            try {
                Class<?> selCh = Class.forName("sun.nio.ch.SelChImpl");
                fdVal = MethodHandles.lookup().findVirtual(selCh, "getFDVal", MethodType.methodType(int.class));
            } catch (ReflectiveOperationException | RuntimeException e) {
                Module m = GatherWriter.class.getModule();
                return off("the JVM does not export sun.nio.ch to " + (m.isNamed() ? m.getName() : "the class path")
                        + " (add --add-exports java.base/sun.nio.ch=" + (m.isNamed() ? m.getName() : "ALL-UNNAMED")
                        + ")");
            }
            try {
                Linker linker = Linker.nativeLinker();
                Linker.Option errno = Linker.Option.captureCallState("errno");
                var libc = linker.defaultLookup();
                MethodHandle sendmsg = linker.downcallHandle(libc.find("sendmsg").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.ADDRESS,
                                ValueLayout.JAVA_INT), errno);
                MethodHandle dup = linker.downcallHandle(libc.find("dup").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), errno);
                MethodHandle close = linker.downcallHandle(libc.find("close").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), errno);
                return new Native(sendmsg, dup, close, fdVal, null);
            } catch (RuntimeException e) { // IllegalCallerException without native access, a missing symbol
                return off("cannot link sendmsg/dup/close: " + e);
            }
        }

        static Native off(String why) {
            return new Native(null, null, null, null, why);
        }
    }

    /** Why gathering writes are not available in this JVM, or null when they are. */
    static String unavailableReason() {
        return N.unavailable;
    }

    GatherWriter() {
        if (N.unavailable != null) {
            throw new IllegalStateException(N.unavailable);
        }
        msg.fill((byte) 0);
        msg.set(ValueLayout.JAVA_LONG, MSG_IOV, iov.address());
    }

    /**
     * Makes writes go to {@code ch}'s socket, duplicating its descriptor when it is not the one
     * bound already (the previous duplicate is closed). Nothing may be pending.
     *
     * @throws IOException when the channel is closed or the descriptor cannot be duplicated
     */
    void bind(SocketChannel ch) throws IOException {
        if (ch == boundTo) {
            return;
        }
        if (count != 0) {
            throw new IllegalStateException("pieces pending");
        }
        unbind();
        int d;
        try {
            int orig = (int) N.fdVal.invoke(ch);
            if (orig < 0 || !ch.isOpen()) {
                throw new java.nio.channels.ClosedChannelException();
            }
            d = (int) N.dup.invokeExact(state, orig);
        } catch (IOException e) {
            throw e;
        } catch (Throwable t) {
            throw new IOException("reading the socket's descriptor: " + t, t);
        }
        if (d < 0) {
            throw new IOException(errnoMessage("dup", errno()));
        }
        // the channel may have been closed (and its number reused) between reading it and dup:
        // then the duplicate is not this channel's socket
        if (!ch.isOpen()) {
            closeFd(d);
            throw new java.nio.channels.ClosedChannelException();
        }
        fd = d;
        boundTo = ch;
    }

    /**
     * Whether writes can go to {@code ch} now: true when bound to it already or bound now; false
     * when pieces for another channel are pending or the descriptor cannot be had (logged at DEBUG
     * with {@code owner}, the connection's name; the caller then writes without gathering).
     */
    boolean use(SocketChannel ch, String owner) {
        if (boundTo(ch)) {
            return true;
        }
        if (!isEmpty()) {
            return false;
        }
        try {
            bind(ch);
            return true;
        } catch (IOException e) {
            LOG.debug("no gathering writes on connection {}: {}", owner, e.getMessage());
            return false;
        }
    }

    /** Whether a duplicate is held for {@code ch}. */
    boolean boundTo(SocketChannel ch) {
        return boundTo == ch && fd >= 0;
    }

    /** Closes the duplicate (the socket closes once every descriptor of it is closed). Nothing may be pending. */
    void unbind() {
        count = 0;
        first = 0;
        bytes = 0;
        if (fd >= 0) {
            closeFd(fd);
            fd = -1;
        }
        boundTo = null;
    }

    private void closeFd(int d) {
        try {
            int rc = (int) N.close.invokeExact(state, d);
            assert rc == 0 || rc == -1;
        } catch (Throwable t) {
            throw new IllegalStateException("close: " + t, t);
        }
    }

    /** Pieces queued. */
    int pieces() {
        return count;
    }

    /** Bytes queued and not yet written. */
    long pending() {
        return bytes;
    }

    /** Whether nothing is queued (or everything queued was written). */
    boolean isEmpty() {
        return bytes == 0;
    }

    /** Room for at least {@code n} more pieces. */
    boolean hasRoom(int n) {
        return count + n <= MAX_PIECES;
    }

    /**
     * Queues {@code len} bytes at {@code address}; a piece that continues the previous one in
     * memory extends it. Needs room for one piece ({@link #hasRoom}).
     */
    void add(long address, long len) {
        if (len <= 0) {
            return;
        }
        if (count > 0) {
            long last = 16L * (count - 1);
            long base = iov.get(ValueLayout.JAVA_LONG, last);
            long l = iov.get(ValueLayout.JAVA_LONG, last + 8);
            if (base + l == address) {
                iov.set(ValueLayout.JAVA_LONG, last + 8, l + len);
                bytes += len;
                return;
            }
        }
        if (count == MAX_PIECES) {
            throw new IllegalStateException("no room for another piece");
        }
        long at = 16L * count;
        iov.set(ValueLayout.JAVA_LONG, at, address);
        iov.set(ValueLayout.JAVA_LONG, at + 8, len);
        count++;
        bytes += len;
    }

    /**
     * One {@code sendmsg} of what is pending: the bytes written, 0 when the socket would block or
     * the call was interrupted. When everything was written the list is empty again.
     *
     * @throws IOException on a socket error (the connection is unusable)
     */
    long writeOnce() throws IOException {
        if (bytes == 0) {
            return 0;
        }
        if (fd < 0) {
            throw new IOException("gathering write on an unbound writer");
        }
        msg.set(ValueLayout.JAVA_LONG, MSG_IOV, iov.address() + 16L * first);
        msg.set(ValueLayout.JAVA_LONG, MSG_IOVLEN, count - first);
        long n;
        try {
            n = (long) N.sendmsg.invokeExact(state, fd, msg, MSG_NOSIGNAL);
        } catch (Throwable t) {
            throw new IOException("sendmsg: " + t, t);
        }
        if (n < 0) {
            int e = errno();
            if (e == EAGAIN || e == EINTR) {
                return 0;
            }
            throw new IOException(errnoMessage("sendmsg", e));
        }
        consume(n);
        return n;
    }

    private void consume(long n) {
        bytes -= n;
        if (bytes == 0) {
            count = 0;
            first = 0;
            return;
        }
        long left = n;
        while (left > 0) {
            long at = 16L * first;
            long l = iov.get(ValueLayout.JAVA_LONG, at + 8);
            if (left < l) {
                iov.set(ValueLayout.JAVA_LONG, at, iov.get(ValueLayout.JAVA_LONG, at) + left);
                iov.set(ValueLayout.JAVA_LONG, at + 8, l - left);
                return;
            }
            left -= l;
            first++;
        }
    }

    /** Drops what is queued (after a failed connection). */
    void clear() {
        count = 0;
        first = 0;
        bytes = 0;
    }

    private int errno() {
        return (int) ERRNO.get(state, 0L);
    }

    private static String errnoMessage(String call, int errno) {
        String name = switch (errno) {
            case 9 -> "EBADF";
            case 24 -> "EMFILE";
            case 32 -> "EPIPE";
            case 104 -> "ECONNRESET";
            case 107 -> "ENOTCONN";
            case 110 -> "ETIMEDOUT";
            case 14 -> "EFAULT";
            default -> "errno";
        };
        return String.format(Locale.ROOT, "%s failed: %s (errno %d)", call, name, errno);
    }

    /** Closes the duplicate; the writer may be bound again. */
    @Override
    public void close() {
        unbind();
    }
}
