package io.mooncake4j.engine.rdma.verbs;

/**
 * One entry of {@code ibv_get_device_list}: kernel device name (for example {@code mlx5_0}),
 * node GUID (network byte order as returned) and the sysfs path of the IB class device.
 */
public record DeviceInfo(int index, String name, long guid, String ibdevPath) {}
