package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.rdma.verbs.AsyncEvent;
import io.mooncake4j.engine.rdma.verbs.DeviceAttributes;
import io.mooncake4j.engine.rdma.verbs.Gid;
import io.mooncake4j.engine.rdma.verbs.GidEntry;
import io.mooncake4j.engine.rdma.verbs.IbvContext;
import io.mooncake4j.engine.rdma.verbs.IbvCq;
import io.mooncake4j.engine.rdma.verbs.IbvDeviceList;
import io.mooncake4j.engine.rdma.verbs.IbvMr;
import io.mooncake4j.engine.rdma.verbs.IbvPd;
import io.mooncake4j.engine.rdma.verbs.IbvQp;
import io.mooncake4j.engine.rdma.verbs.DeviceInfo;
import io.mooncake4j.engine.rdma.verbs.PortAttributes;
import io.mooncake4j.engine.rdma.verbs.QpCapabilities;
import io.mooncake4j.engine.rdma.verbs.RtrAttributes;
import io.mooncake4j.engine.rdma.verbs.RtsAttributes;
import io.mooncake4j.engine.rdma.verbs.SendWorkRequests;
import io.mooncake4j.engine.rdma.verbs.VerbsLibrary;
import io.mooncake4j.engine.rdma.verbs.WorkCompletions;
import java.util.List;

/** {@link RdmaProvider} over libibverbs. Check {@link RdmaAvailability} first. */
public final class VerbsRdmaProvider implements RdmaProvider {

    @Override
    public List<String> deviceNames() {
        try (IbvDeviceList list = IbvDeviceList.get()) {
            return list.devices().stream().map(DeviceInfo::name).toList();
        }
    }

    /** True when the loaded libibverbs has {@code ibv_reg_dmabuf_mr}. */
    @Override
    public boolean supportsDmabuf() {
        return VerbsLibrary.capabilities().contains("ibv_reg_dmabuf_mr");
    }

    @Override
    public Device open(String name) {
        IbvContext ctx;
        try (IbvDeviceList list = IbvDeviceList.get()) {
            ctx = list.open(name);
        }
        try {
            return new VerbsDevice(ctx, ctx.allocPd());
        } catch (RuntimeException e) {
            ctx.close();
            throw e;
        }
    }

    private record VerbsDevice(IbvContext ctx, IbvPd pd) implements Device {
        @Override
        public String name() {
            return ctx.name();
        }

        @Override
        public boolean hasAsyncEvents() {
            return true;
        }

        @Override
        public AsyncEvent nextAsyncEvent(int timeoutMs) {
            return ctx.nextAsyncEvent(timeoutMs);
        }

        @Override
        public DeviceAttributes attributes() {
            return ctx.queryDevice();
        }

        @Override
        public PortAttributes port(int port) {
            return ctx.queryPort(port);
        }

        @Override
        public Gid gid(int port, int index) {
            return ctx.queryGid(port, index);
        }

        @Override
        public GidEntry gidEntry(int port, int index) {
            return ctx.queryGidEntry(port, index);
        }

        @Override
        public MemoryRegion register(long address, long length, int access) {
            IbvMr mr = pd.registerMemory(address, length, access);
            return new VerbsMr(mr, mr.address());
        }

        @Override
        public MemoryRegion registerDmabuf(long offset, long length, long iova, int fd, int access) {
            // libibverbs sets ibv_mr.addr to the dma-buf offset for these; the transport addresses them by iova
            return new VerbsMr(pd.registerDmabuf(offset, length, iova, fd, access), iova);
        }

        @Override
        public CompletionQueue createCq(int cqe) {
            return new VerbsCq(ctx.createCq(cqe));
        }

        @Override
        public QueuePair createRcQp(CompletionQueue cq, QpCapabilities caps) {
            IbvCq c = ((VerbsCq) cq).cq();
            return new VerbsQp(pd.createRcQp(c, c, caps));
        }

        @Override
        public void close() {
            ctx.close();
        }
    }

    private record VerbsMr(IbvMr mr, long address) implements MemoryRegion {

        @Override
        public long length() {
            return mr.length();
        }

        @Override
        public int lkey() {
            return mr.lkey();
        }

        @Override
        public int rkey() {
            return mr.rkey();
        }

        @Override
        public void close() {
            mr.close();
        }
    }

    private record VerbsCq(IbvCq cq) implements CompletionQueue {
        @Override
        public int poll(WorkCompletions wc) {
            return cq.poll(wc);
        }

        @Override
        public void close() {
            cq.close();
        }
    }

    private record VerbsQp(IbvQp qp) implements QueuePair {
        @Override
        public int qpNum() {
            return qp.qpNum();
        }

        @Override
        public int state() {
            return qp.state();
        }

        @Override
        public void modifyToInit(int portNum, int pkeyIndex, int accessFlags) {
            qp.modifyToInit(portNum, pkeyIndex, accessFlags);
        }

        @Override
        public void modifyToRtr(RtrAttributes attributes) {
            qp.modifyToRtr(attributes);
        }

        @Override
        public void modifyToRts(RtsAttributes attributes) {
            qp.modifyToRts(attributes);
        }

        @Override
        public void modifyToError() {
            qp.modifyToError();
        }

        @Override
        public int postSend(SendWorkRequests wrs, int first) {
            return qp.postSend(wrs, first);
        }

        @Override
        public void close() {
            qp.close();
        }
    }
}
