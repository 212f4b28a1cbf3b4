package io.mooncake4j.engine.rdma.verbs;

/**
 * The {@code struct ibv_device_attr} fields Mooncake uses to clamp its configuration
 * ({@code updateGlobalConfig}): MR size, QP/CQ/SGE limits, RDMA-read depth, port count. Each
 * component is the field of the same name in C ({@code fw_ver}, {@code node_guid},
 * {@code max_mr_size}, ...).
 *
 * @param fwVer           {@code fw_ver}
 * @param nodeGuid        {@code node_guid}
 * @param maxMrSize       {@code max_mr_size}
 * @param vendorId        {@code vendor_id}
 * @param vendorPartId    {@code vendor_part_id}
 * @param maxQp           {@code max_qp}
 * @param maxQpWr         {@code max_qp_wr}
 * @param maxSge          {@code max_sge}
 * @param maxCq           {@code max_cq}
 * @param maxCqe          {@code max_cqe}
 * @param maxMr           {@code max_mr}
 * @param maxPd           {@code max_pd}
 * @param maxQpRdAtom     {@code max_qp_rd_atom}
 * @param maxQpInitRdAtom {@code max_qp_init_rd_atom}
 * @param physPortCnt     {@code phys_port_cnt}
 */
public record DeviceAttributes(String fwVer, long nodeGuid, long maxMrSize, int vendorId, int vendorPartId,
                               int maxQp, int maxQpWr, int maxSge, int maxCq, int maxCqe, int maxMr, int maxPd,
                               int maxQpRdAtom, int maxQpInitRdAtom, int physPortCnt) {}
