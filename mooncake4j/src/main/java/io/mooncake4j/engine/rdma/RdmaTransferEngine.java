package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.core.CoreSettings;
import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * The engine core ({@link CoreEngine}) with only the {@code rdma} transport ({@link RdmaTransport}),
 * wire-compatible with Mooncake's RDMA engine ({@code protocol = "rdma"}; {@code "auto"}/{@code ""}
 * mean rdma here). Without RDMA (no devices, ENOSYS, no libibverbs) {@link #initialize} returns -1
 * and {@link #lastError()} holds the diagnosis. A preset: it adds the RDMA transport's monitoring
 * getters, no engine-level code. {@code TransferEngines.create("rdma")} is the full core instead,
 * with tcp beside rdma for peers and buffers rdma cannot reach.
 */
public final class RdmaTransferEngine extends CoreEngine {

    /**
     * A notification received through the handshake port (Notify, type 2).
     *
     * @param name    the sender's name field
     * @param message the notification text
     */
    public record Notify(String name, String message) {}

    private final RdmaEngineConfig config;

    /** An engine over libibverbs configured from the environment. */
    public RdmaTransferEngine() {
        this(new VerbsRdmaProvider(), RdmaEngineConfig.fromEnvironment(), RdmaAvailability::unavailabilityCause,
                GpuDirectSupport.cuda());
    }

    /** An engine over {@code provider} (tests: the emulated provider), always considered available. */
    public RdmaTransferEngine(RdmaProvider provider, RdmaEngineConfig config) {
        this(provider, config, Optional::empty, GpuDirectSupport.cuda());
    }

    /** @param availability why RDMA cannot run here (empty when it can); checked by {@link #initialize} */
    public RdmaTransferEngine(RdmaProvider provider, RdmaEngineConfig config,
            Supplier<Optional<RdmaAvailability.Cause>> availability) {
        this(provider, config, availability, GpuDirectSupport.cuda());
    }

    /**
     * @param availability why RDMA cannot run here (empty when it can); checked by {@link #initialize}
     * @param gpu          how GPU memory ({@code cuda:N}) is found and exported for GPUDirect registration
     */
    public RdmaTransferEngine(RdmaProvider provider, RdmaEngineConfig config,
            Supplier<Optional<RdmaAvailability.Cause>> availability, GpuDirectSupport gpu) {
        super(coreSettings(config), List.of(new Candidate("rdma",
                () -> new RdmaTransport(provider, config, availability, gpu))), System.getenv());
        this.config = config;
    }

    /** The core settings that go with an RDMA configuration. */
    static CoreSettings coreSettings(RdmaEngineConfig c) {
        return new CoreSettings(c.handshake(), c.transferTimeoutMs(), CoreSettings.DEFAULT_MAX_SEGMENTS);
    }

    private RdmaTransport rdma() {
        return (RdmaTransport) transport("rdma");
    }

    /**
     * The last control-path error ({@link #initialize}, registration) in words that name the cause
     * and the fix, or null. {@code bench --protocol rdma} prints it.
     */
    @Override
    public String lastError() {
        RdmaTransport t = rdma();
        String mine = t == null ? null : t.lastError();
        return mine != null ? mine : super.lastError();
    }

    /** Drains the notifications received so far (Mooncake {@code getNotifies}). */
    public List<Notify> getNotifies() {
        return drainNotifies(Notify::new);
    }

    /** Names of the open devices, in descriptor order. */
    public List<String> devices() {
        RdmaTransport t = rdma();
        return t == null ? List.of() : t.devices();
    }

    /** Asynchronous device events received so far (monitoring and tests). */
    public long asyncEvents() {
        RdmaTransport t = rdma();
        return t == null ? 0 : t.asyncEvents();
    }

    /** Port-down events on the engine's port so far (monitoring and tests). */
    public long portDownEvents() {
        RdmaTransport t = rdma();
        return t == null ? 0 : t.portDownEvents();
    }

    /** Devices out of NIC selection after a port or device failure event (monitoring and tests). */
    public List<String> inactiveDevices() {
        RdmaTransport t = rdma();
        return t == null ? List.of() : t.inactiveDevices();
    }

    /** Completions that reported an error so far (monitoring and tests). */
    public long failedCompletions() {
        RdmaTransport t = rdma();
        return t == null ? 0 : t.failedCompletions();
    }

    /** Work-request slices re-dispatched after a failure so far (monitoring and tests). */
    public long retriedSlices() {
        RdmaTransport t = rdma();
        return t == null ? 0 : t.retriedSlices();
    }

    /** The asynchronous-event reader threads (tests). */
    List<Thread> asyncEventThreads() {
        RdmaTransport t = rdma();
        return t == null ? List.of() : t.asyncEventThreads();
    }

    /** Endpoints currently mapped, over all devices (tests). */
    int endpointCount() {
        RdmaTransport t = rdma();
        return t == null ? 0 : t.endpointCount();
    }

    /** The endpoints currently mapped, over all devices (tests). */
    List<RdmaEndpoint> endpoints() {
        RdmaTransport t = rdma();
        return t == null ? List.of() : t.endpoints();
    }

    /** The poller threads (tests). */
    List<Thread> pollerThreads() {
        RdmaTransport t = rdma();
        return t == null ? List.of() : t.pollerThreads();
    }

    /** Work-request slices held (queued or in flight) (tests). */
    int liveSlices() {
        RdmaTransport t = rdma();
        return t == null ? 0 : t.liveSlices();
    }

    /** The settings in use (after clamping at initialize). */
    RdmaSettings settings() {
        RdmaTransport t = rdma();
        return t == null ? config.settings() : t.settings();
    }

    /** Work-request slices of a task of {@code len} bytes within one buffer on each side (tests). */
    int sliceCount(long len) {
        return RdmaTransport.sliceCount(settings(), len);
    }

    /** How each device registered the buffer at {@code address} (tests, diagnostics). */
    List<String> registrationPaths(long address) {
        RdmaTransport t = rdma();
        return t == null ? List.of() : t.registrationPaths(address);
    }
}
