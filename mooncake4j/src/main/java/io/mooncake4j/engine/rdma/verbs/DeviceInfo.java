package io.mooncake4j.engine.rdma.verbs;

/**
 * One entry of {@code ibv_get_device_list}: kernel device name (for example {@code mlx5_0}),
 * node GUID (network byte order as returned) and the sysfs path of the IB class device.
 *
 * @param index     position in the list
 * @param name      {@code ibv_get_device_name}
 * @param guid      {@code ibv_get_device_guid}
 * @param ibdevPath the device's {@code ibdev_path}
 */
public record DeviceInfo(int index, String name, long guid, String ibdevPath) {}
