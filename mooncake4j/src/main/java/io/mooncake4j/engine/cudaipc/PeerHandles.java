package io.mooncake4j.engine.cudaipc;

import io.mooncake4j.engine.handshake.SegmentDescriptor;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One peer's GPU allocations as this process reaches them: each advertised IPC handle opened once
 * per local device context ({@link IpcDriver#open}), kept until {@link #close}, at most
 * {@code cap} of them. Built for one descriptor: the transport replaces it when the peer's
 * descriptor changes. A refused open is remembered (the transport reports it once; the core then
 * stops offering cuda-ipc to the peer until its descriptor is refreshed).
 *
 * <p>Thread-safe. Opening happens under the monitor (once per allocation). A copy holds a lease on
 * its {@link Opened} handle; {@link #close} marks every handle closing and the driver unmaps each
 * one when its last lease ends, so no copy ever runs on an unmapped address.
 */
final class PeerHandles {

    private static final Logger LOG = LoggerFactory.getLogger(PeerHandles.class);

    /** An opened remote allocation, with its leases. */
    static final class Opened {
        final int device;
        final long mapped;
        final long size;
        private int users;
        private boolean closing;
        private boolean unmapped;

        Opened(int device, long mapped, long size) {
            this.device = device;
            this.mapped = mapped;
            this.size = size;
        }

        synchronized boolean lease() {
            if (closing) {
                return false;
            }
            users++;
            return true;
        }

        /** Ends a lease; true when the caller must now unmap. */
        synchronized boolean release() {
            users--;
            return takeUnmap();
        }

        /** Marks it closing; true when the caller must unmap now (no lease left). */
        synchronized boolean markClosing() {
            closing = true;
            return takeUnmap();
        }

        private boolean takeUnmap() {
            if (closing && users == 0 && !unmapped) {
                unmapped = true;
                return true;
            }
            return false;
        }
    }

    /** Why a handle is not usable: the message, and whether it is final for this peer. */
    static final class Refusal extends Exception {
        private static final long serialVersionUID = 1L;
        final boolean unreachable;

        Refusal(String message, boolean unreachable) {
            super(message, null, false, false);
            this.unreachable = unreachable;
        }
    }

    private final IpcDriver driver;
    private final SegmentDescriptor descriptor;
    private final String peerName;
    private final int cap;
    private final Map<String, Opened> opened = new HashMap<>();
    private final Map<String, String> refused = new HashMap<>();
    /** Decoded buffer entries of {@link #descriptor} by address (bounded by its buffer count). */
    private final Map<Long, CudaIpcAdvert.Parsed> parsed = new ConcurrentHashMap<>();
    private boolean closed;

    private static final CudaIpcAdvert.Parsed NONE = new CudaIpcAdvert.Parsed(null, null);

    PeerHandles(IpcDriver driver, SegmentDescriptor descriptor, String peerName, int cap) {
        this.driver = driver;
        this.descriptor = descriptor;
        this.peerName = peerName;
        this.cap = cap;
    }

    SegmentDescriptor descriptor() {
        return descriptor;
    }

    /** {@code b}'s decoded advert (decoded once), null when it advertises nothing for cuda-ipc. */
    CudaIpcAdvert.Parsed parsed(SegmentDescriptor.Buffer b) {
        CudaIpcAdvert.Parsed p = parsed.get(b.addr());
        if (p == null) {
            p = CudaIpcAdvert.bufferOf(b);
            parsed.put(b.addr(), p == null ? NONE : p);
        }
        return p == NONE ? null : p;
    }

    private static String key(CudaIpcAdvert.Buffer b, int device) {
        return b.handleHex() + "@" + device;
    }

    /** Whether a lease on {@code b} in {@code device}'s context could be had now without exceeding the cap (cheap). */
    synchronized boolean mayLease(CudaIpcAdvert.Buffer b, int device) {
        String k = key(b, device);
        return !closed && !refused.containsKey(k) && (opened.containsKey(k) || opened.size() < cap);
    }

    /**
     * A lease on {@code b}'s allocation mapped in {@code device}'s context, opening it on first use.
     *
     * @throws Refusal when it cannot be opened (remembered), the cap is reached, or the peer's handles were closed
     */
    Opened lease(CudaIpcAdvert.Buffer b, int device) throws Refusal {
        String k = key(b, device);
        synchronized (this) {
            if (closed) {
                throw new Refusal("the peer's cuda-ipc handles were closed (descriptor refresh or shutdown)", false);
            }
            Opened o = opened.get(k);
            if (o != null) {
                if (o.lease()) {
                    return o;
                }
                throw new Refusal("the peer's cuda-ipc handle is closing", false);
            }
            String why = refused.get(k);
            if (why != null) {
                throw new Refusal(why, true);
            }
            if (opened.size() >= cap) {
                throw new Refusal(String.format(Locale.ROOT, "%d IPC handles of %s open already (the cap, "
                        + "%s); this allocation goes over the next transport", cap, peerName, CudaIpcTransport.MAX_HANDLES_ENV),
                        false);
            }
            long mapped;
            try {
                mapped = driver.open(device, b.handle());
            } catch (IpcDriver.Failure e) {
                String msg = String.format(Locale.ROOT, "cannot open the IPC handle of %s's allocation on GPU %s in "
                        + "local cuda:%d: %s", peerName, b.device(), device, e.getMessage());
                refused.put(k, msg);
                throw new Refusal(msg, true);
            }
            o = new Opened(device, mapped, b.size());
            o.lease();
            opened.put(k, o);
            return o;
        }
    }

    /** Ends a lease from {@link #lease}; unmaps when the handles were closed meanwhile and it was the last. */
    void release(Opened o) {
        if (o.release()) {
            unmap(o);
        }
    }

    private void unmap(Opened o) {
        try {
            driver.close(o.device, o.mapped);
        } catch (IpcDriver.Failure e) {
            LOG.warn("cuda-ipc: unmapping an allocation of {} failed: {}", peerName, e.getMessage());
        }
    }

    /** Handles open now (tests, diagnostics). */
    synchronized int openCount() {
        return opened.size();
    }

    /** Closes every handle (each once its copies ended). Idempotent. */
    void close() {
        List<Opened> all;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            all = List.copyOf(opened.values());
            opened.clear();
        }
        for (Opened o : all) {
            if (o.markClosing()) {
                unmap(o);
            }
        }
    }
}
