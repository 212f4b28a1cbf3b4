package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * {@code ibv_get_device_list} / {@code ibv_free_device_list}. Open the devices you need before
 * closing the list; open contexts stay valid after it is freed.
 */
@SuppressWarnings("restricted") // deliberate FFM: native pointers are sized with reinterpret, handles linked here
public final class IbvDeviceList implements AutoCloseable {

    private MemorySegment list; // struct ibv_device ** (NULL-terminated), null once freed
    private final List<DeviceInfo> devices;
    private final List<MemorySegment> pointers;

    private IbvDeviceList(MemorySegment list, int count) {
        this.list = list;
        List<DeviceInfo> d = new ArrayList<>(count);
        List<MemorySegment> p = new ArrayList<>(count);
        MemorySegment array = list.reinterpret(ADDRESS.byteSize() * (count + 1L));
        for (int i = 0; i < count; i++) {
            MemorySegment dev = array.getAtIndex(ADDRESS, i).reinterpret(VerbsLayouts.IBV_DEVICE.byteSize());
            p.add(dev);
            d.add(new DeviceInfo(i, name(dev), guid(dev),
                    dev.getString(VerbsLayouts.DEVICE_IBDEV_PATH)));
        }
        this.devices = List.copyOf(d);
        this.pointers = List.copyOf(p);
    }

    /**
     * Lists the RDMA devices. Throws {@link VerbsException} with the errno when the call fails,
     * for example {@code ENOSYS} on a kernel without InfiniBand support.
     */
    public static IbvDeviceList get() {
        Verbs.requireAvailable();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment capture = arena.allocate(Verbs.CAPTURE_LAYOUT);
            MemorySegment num = arena.allocate(JAVA_INT);
            MemorySegment list = (MemorySegment) Verbs.GET_DEVICE_LIST.invokeExact(capture, num);
            if (list.equals(MemorySegment.NULL)) {
                int errno = Verbs.errno(capture);
                throw new VerbsException("ibv_get_device_list", errno, hint(errno));
            }
            return new IbvDeviceList(list, num.get(JAVA_INT, 0));
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw new VerbsException("ibv_get_device_list", 0, "downcall failed: " + t);
        }
    }

    static String hint(int errno) {
        return switch (errno) {
            case Verbs.ENOSYS -> "the kernel has no InfiniBand/RDMA support (no ib_uverbs); use protocol \"tcp\"";
            case Verbs.EPERM, Verbs.EACCES -> "no permission to open /dev/infiniband/*; check the device permissions";
            case Verbs.ENOMEM -> "out of memory";
            default -> "see ibv_get_device_list(3)";
        };
    }

    public List<DeviceInfo> devices() {
        return devices;
    }

    /** Opens device {@code name}; throws when it is not in the list or cannot be opened. */
    public synchronized IbvContext open(String name) {
        if (list == null) {
            throw new IllegalStateException("device list already freed");
        }
        for (DeviceInfo d : devices) {
            if (d.name().equals(name)) {
                return IbvContext.open(pointers.get(d.index()), d);
            }
        }
        throw new VerbsException("ibv_open_device", 0, String.format(Locale.ROOT,
                "no RDMA device named '%s'; devices here: %s", name, devices.stream().map(DeviceInfo::name).toList()));
    }

    @Override
    public synchronized void close() {
        if (list == null) {
            return;
        }
        try {
            Verbs.FREE_DEVICE_LIST.invokeExact(list);
        } catch (Throwable t) {
            throw new VerbsException("ibv_free_device_list", 0, "downcall failed: " + t);
        } finally {
            list = null;
        }
    }

    private static String name(MemorySegment dev) {
        try {
            MemorySegment s = (MemorySegment) Verbs.GET_DEVICE_NAME.invokeExact(dev);
            return s.equals(MemorySegment.NULL) ? "" : s.reinterpret(VerbsLayouts.IBV_DEVICE.byteSize()).getString(0);
        } catch (Throwable t) {
            throw new VerbsException("ibv_get_device_name", 0, "downcall failed: " + t);
        }
    }

    private static long guid(MemorySegment dev) {
        try {
            return (long) Verbs.GET_DEVICE_GUID.invokeExact(dev);
        } catch (Throwable t) {
            throw new VerbsException("ibv_get_device_guid", 0, "downcall failed: " + t);
        }
    }
}
