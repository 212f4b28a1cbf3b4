package io.mooncake4j.memory.cuda;

import io.mooncake4j.memory.MemoryLocation;
import io.mooncake4j.memory.MemoryStorage;

/**
 * Where an address lives, for storages registered with location {@code *} (Mooncake asks
 * {@code cudaPointerGetAttributes} the same way): device memory is {@code cuda:<device>};
 * anything else — pageable or pinned host memory, managed memory, an address CUDA has never
 * seen — is host memory and gets the caller's host location. Without CUDA every address is host
 * memory. Thread-safe.
 */
public final class CudaPointers {

    private CudaPointers() {}

    /**
     * {@return the CUDA device whose memory {@code address} is, or -1 for host memory (or no CUDA)}
     *
     * @param address the first byte
     */
    public static int deviceOf(long address) {
        if (address == 0 || !CudaAvailability.isAvailable()) {
            return -1;
        }
        int[] typeAndDevice = new int[2];
        int rc = JCudaBinding.pointerAttributes(address, typeAndDevice);
        if (rc != CudaError.SUCCESS) {
            // CUDA before 11 answered cudaErrorInvalidValue for plain host memory and recorded it
            // as the thread's last error; clear it so a later call does not report it
            JCudaBinding.getLastError();
            return -1;
        }
        return typeAndDevice[0] == JCudaBinding.MEMORY_TYPE_DEVICE ? typeAndDevice[1] : -1;
    }

    /**
     * The location to register {@code [address, ...)} under: {@code declared} unless it is
     * {@code *}, in which case {@code cuda:N} for device memory and {@code hostLocation} otherwise.
     *
     * @param declared     the location the caller declared
     * @param address      the first byte
     * @param hostLocation the location of the host memory
     * @return the location to register the memory under
     */
    public static String resolveLocation(String declared, long address, String hostLocation) {
        MemoryLocation.validate(declared);
        if (!MemoryLocation.WILDCARD.equals(declared)) {
            return declared;
        }
        int device = deviceOf(address);
        return device >= 0 ? MemoryLocation.cuda(device) : MemoryLocation.validate(hostLocation);
    }

    /**
     * {@return {@link #resolveLocation(String, long, String)} for a storage}
     *
     * @param storage      the memory the tensor lies in
     * @param hostLocation the location of the host memory
     */
    public static String resolveLocation(MemoryStorage storage, String hostLocation) {
        return resolveLocation(storage.location(), storage.address(), hostLocation);
    }
}
