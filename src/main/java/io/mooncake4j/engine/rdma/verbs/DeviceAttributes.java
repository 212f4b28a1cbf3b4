package io.mooncake4j.engine.rdma.verbs;

/**
 * The {@code struct ibv_device_attr} fields Mooncake uses to clamp its configuration
 * ({@code updateGlobalConfig}): MR size, QP/CQ/SGE limits, RDMA-read depth, port count.
 */
public record DeviceAttributes(String fwVer, long nodeGuid, long maxMrSize, int vendorId, int vendorPartId,
                               int maxQp, int maxQpWr, int maxSge, int maxCq, int maxCqe, int maxMr, int maxPd,
                               int maxQpRdAtom, int maxQpInitRdAtom, int physPortCnt) {}
