package io.mooncake4j.memory.cuda;

import static java.lang.invoke.MethodType.methodType;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.VarHandle;

/**
 * The JCuda runtime calls this package uses, reached through method handles so that the module
 * never names JCuda at compile time (see {@code docs/gpu.md}: JCuda's jars have no
 * {@code Automatic-Module-Name}).
 *
 * <p>Only {@link CudaAvailability} touches this class first, after JCuda's JNI library has
 * loaded; its static initialiser then resolves every handle (and fails as a whole if one is
 * missing, which the probe reports). Every other use happens behind
 * {@link CudaAvailability#ensureAvailable()}.
 *
 * <p>JCuda objects are typed {@code Object} here. A {@code jcuda.Pointer} whose
 * {@code nativePointer} field is set and which has no buffer is passed to C as
 * {@code nativePointer + byteOffset}; {@link #pointer(long)} and {@link #setAddress} build such
 * pointers, so raw addresses cross without copies. JCuda's exceptions are left disabled (its
 * default): every call returns the {@code cudaError_t}.
 */
final class JCudaBinding {

    // cudaMemoryType (driver_types.h)
    static final int MEMORY_TYPE_DEVICE = 2;
    // cudaHostRegisterPortable (cuda_runtime_api.h)
    static final int HOST_REGISTER_PORTABLE = 1;
    // cudaStreamNonBlocking (cuda_runtime_api.h)
    static final int STREAM_NON_BLOCKING = 1;
    // cudaEventDisableTiming (cuda_runtime_api.h)
    static final int EVENT_DISABLE_TIMING = 2;

    private static final MethodHandle NEW_POINTER;        // () Object
    private static final MethodHandle NEW_STREAM;         // () Object
    private static final MethodHandle NEW_ATTRIBUTES;     // () Object
    private static final MethodHandle ATTR_TYPE;          // (Object) int
    private static final MethodHandle ATTR_DEVICE;        // (Object) int
    private static final VarHandle NATIVE_POINTER;        // NativePointerObject.nativePointer, Object receiver

    private static final MethodHandle GET_DEVICE_COUNT;   // (int[]) int
    private static final MethodHandle DRIVER_VERSION;     // (int[]) int
    private static final MethodHandle RUNTIME_VERSION;    // (int[]) int
    private static final MethodHandle SET_DEVICE;         // (int) int
    private static final MethodHandle GET_LAST_ERROR;     // () int
    private static final MethodHandle DEVICE_SYNC;        // () int
    private static final MethodHandle MALLOC;             // (Object ptr, long) int
    private static final MethodHandle FREE;               // (Object ptr) int
    private static final MethodHandle MEMSET;             // (Object ptr, int, long) int
    private static final MethodHandle HOST_REGISTER;      // (Object ptr, long, int) int
    private static final MethodHandle HOST_UNREGISTER;    // (Object ptr) int
    private static final MethodHandle MEMCPY;             // (Object dst, Object src, long, int) int
    private static final MethodHandle MEMCPY_ASYNC;       // (Object dst, Object src, long, int, Object stream) int
    private static final MethodHandle STREAM_CREATE;      // (Object stream, int flags) int
    private static final MethodHandle STREAM_SYNC;        // (Object stream) int
    private static final MethodHandle STREAM_QUERY;       // (Object stream) int
    private static final MethodHandle STREAM_DESTROY;     // (Object stream) int
    private static final MethodHandle STREAM_WAIT_EVENT;  // (Object stream, Object event, int flags) int
    private static final MethodHandle NEW_EVENT;          // () Object
    private static final MethodHandle EVENT_CREATE;       // (Object event, int flags) int
    private static final MethodHandle EVENT_RECORD;       // (Object event, Object stream) int
    private static final MethodHandle EVENT_QUERY;        // (Object event) int
    private static final MethodHandle EVENT_SYNC;         // (Object event) int
    private static final MethodHandle EVENT_DESTROY;      // (Object event) int
    private static final MethodHandle POINTER_ATTRIBUTES; // (Object attrs, Object ptr) int
    private static final MethodHandle MEM_GET_INFO;       // (long[] free, long[] total) int
    private static final MethodHandle DEVICE_NAME;        // (int) String, via cudaDeviceProp

    static {
        try {
            ClassLoader loader = JCudaBinding.class.getClassLoader();
            Class<?> jcuda = Class.forName(JCudaNatives.RUNTIME_CLASS, true, loader);
            Class<?> pointer = Class.forName("jcuda.Pointer", false, loader);
            Class<?> nativeObject = Class.forName("jcuda.NativePointerObject", false, loader);
            Class<?> stream = Class.forName("jcuda.runtime.cudaStream_t", false, loader);
            Class<?> event = Class.forName("jcuda.runtime.cudaEvent_t", false, loader);
            Class<?> attrs = Class.forName("jcuda.runtime.cudaPointerAttributes", false, loader);
            Class<?> prop = Class.forName("jcuda.runtime.cudaDeviceProp", false, loader);

            MethodHandles.Lookup pub = MethodHandles.publicLookup();
            NEW_POINTER = pub.findConstructor(pointer, methodType(void.class)).asType(methodType(Object.class));
            NEW_STREAM = pub.findConstructor(stream, methodType(void.class)).asType(methodType(Object.class));
            NEW_ATTRIBUTES = pub.findConstructor(attrs, methodType(void.class)).asType(methodType(Object.class));
            ATTR_TYPE = pub.findGetter(attrs, "type", int.class).asType(methodType(int.class, Object.class));
            ATTR_DEVICE = pub.findGetter(attrs, "device", int.class).asType(methodType(int.class, Object.class));

            // the address field is private in jcuda.NativePointerObject; JCuda lives in the unnamed
            // module (class path), which opens every package, once this module reads it
            Module self = JCudaBinding.class.getModule();
            if (!self.canRead(nativeObject.getModule())) {
                self.addReads(nativeObject.getModule());
            }
            NATIVE_POINTER = MethodHandles.privateLookupIn(nativeObject, MethodHandles.lookup())
                    .findVarHandle(nativeObject, "nativePointer", long.class);

            GET_DEVICE_COUNT = find(pub, jcuda, "cudaGetDeviceCount", int[].class);
            DRIVER_VERSION = find(pub, jcuda, "cudaDriverGetVersion", int[].class);
            RUNTIME_VERSION = find(pub, jcuda, "cudaRuntimeGetVersion", int[].class);
            SET_DEVICE = find(pub, jcuda, "cudaSetDevice", int.class);
            GET_LAST_ERROR = find(pub, jcuda, "cudaGetLastError");
            DEVICE_SYNC = find(pub, jcuda, "cudaDeviceSynchronize");
            MALLOC = generic(find(pub, jcuda, "cudaMalloc", pointer, long.class));
            FREE = generic(find(pub, jcuda, "cudaFree", pointer));
            MEMSET = generic(find(pub, jcuda, "cudaMemset", pointer, int.class, long.class));
            HOST_REGISTER = generic(find(pub, jcuda, "cudaHostRegister", pointer, long.class, int.class));
            HOST_UNREGISTER = generic(find(pub, jcuda, "cudaHostUnregister", pointer));
            MEMCPY = generic(find(pub, jcuda, "cudaMemcpy", pointer, pointer, long.class, int.class));
            MEMCPY_ASYNC = generic(find(pub, jcuda, "cudaMemcpyAsync", pointer, pointer, long.class, int.class, stream));
            STREAM_CREATE = generic(find(pub, jcuda, "cudaStreamCreateWithFlags", stream, int.class));
            STREAM_SYNC = generic(find(pub, jcuda, "cudaStreamSynchronize", stream));
            STREAM_QUERY = generic(find(pub, jcuda, "cudaStreamQuery", stream));
            STREAM_DESTROY = generic(find(pub, jcuda, "cudaStreamDestroy", stream));
            STREAM_WAIT_EVENT = generic(find(pub, jcuda, "cudaStreamWaitEvent", stream, event, int.class));
            NEW_EVENT = pub.findConstructor(event, methodType(void.class)).asType(methodType(Object.class));
            EVENT_CREATE = generic(find(pub, jcuda, "cudaEventCreateWithFlags", event, int.class));
            EVENT_RECORD = generic(find(pub, jcuda, "cudaEventRecord", event, stream));
            EVENT_QUERY = generic(find(pub, jcuda, "cudaEventQuery", event));
            EVENT_SYNC = generic(find(pub, jcuda, "cudaEventSynchronize", event));
            EVENT_DESTROY = generic(find(pub, jcuda, "cudaEventDestroy", event));
            POINTER_ATTRIBUTES = generic(find(pub, jcuda, "cudaPointerGetAttributes", attrs, pointer));
            MEM_GET_INFO = find(pub, jcuda, "cudaMemGetInfo", long[].class, long[].class);

            // cudaGetDeviceProperties(prop, device) then prop.getName()
            MethodHandle getProps = generic(find(pub, jcuda, "cudaGetDeviceProperties", prop, int.class));
            MethodHandle newProp = pub.findConstructor(prop, methodType(void.class)).asType(methodType(Object.class));
            MethodHandle getName = pub.findVirtual(prop, "getName", methodType(String.class))
                    .asType(methodType(String.class, Object.class));
            DEVICE_NAME = MethodHandles.insertArguments(
                    MethodHandles.lookup().findStatic(JCudaBinding.class, "deviceName",
                            methodType(String.class, MethodHandle.class, MethodHandle.class, MethodHandle.class, int.class)),
                    0, newProp, getProps, getName);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private JCudaBinding() {}

    private static MethodHandle find(MethodHandles.Lookup lookup, Class<?> owner, String name, Class<?>... params)
            throws ReflectiveOperationException {
        return lookup.findStatic(owner, name, methodType(int.class, params));
    }

    /** Erases JCuda parameter types to {@code Object}, so callers can use {@code invokeExact}. */
    private static MethodHandle generic(MethodHandle mh) {
        MethodType type = mh.type();
        for (int i = 0; i < type.parameterCount(); i++) {
            if (!type.parameterType(i).isPrimitive()) {
                type = type.changeParameterType(i, Object.class);
            }
        }
        return mh.asType(type);
    }

    private static String deviceName(MethodHandle newProp, MethodHandle getProps, MethodHandle getName, int device)
            throws Throwable {
        Object p = (Object) newProp.invokeExact();
        int rc = (int) getProps.invokeExact(p, device);
        return rc == CudaError.SUCCESS ? (String) getName.invokeExact(p) : "device " + device + " (" + CudaError.name(rc) + ")";
    }

    // ---- pointers -------------------------------------------------------------------------

    /** A new {@code jcuda.Pointer} for the raw address {@code address}. Allocates. */
    static Object pointer(long address) {
        Object p = newPointer();
        NATIVE_POINTER.set(p, address);
        return p;
    }

    /** A new, null {@code jcuda.Pointer} (an out-parameter for allocations). */
    static Object newPointer() {
        try {
            return (Object) NEW_POINTER.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Re-aims a pointer made by {@link #pointer}/{@link #newPointer} at {@code address}. */
    static void setAddress(Object pointer, long address) {
        NATIVE_POINTER.set(pointer, address);
    }

    /** The raw address a pointer (or stream handle) holds. */
    static long address(Object nativePointerObject) {
        return (long) NATIVE_POINTER.get(nativePointerObject);
    }

    // ---- calls (each returns the cudaError_t) ----------------------------------------------

    static int getDeviceCount(int[] count) {
        try {
            return (int) GET_DEVICE_COUNT.invokeExact(count);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int driverVersion(int[] out) {
        try {
            return (int) DRIVER_VERSION.invokeExact(out);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int runtimeVersion(int[] out) {
        try {
            return (int) RUNTIME_VERSION.invokeExact(out);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int setDevice(int device) {
        try {
            return (int) SET_DEVICE.invokeExact(device);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int getLastError() {
        try {
            return (int) GET_LAST_ERROR.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code cudaDeviceSynchronize()}: waits for all work of the current device. */
    static int deviceSynchronize() {
        try {
            return (int) DEVICE_SYNC.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int malloc(Object pointerOut, long bytes) {
        try {
            return (int) MALLOC.invokeExact(pointerOut, bytes);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int free(Object pointer) {
        try {
            return (int) FREE.invokeExact(pointer);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int memset(Object pointer, int value, long bytes) {
        try {
            return (int) MEMSET.invokeExact(pointer, value, bytes);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int hostRegister(Object pointer, long bytes, int flags) {
        try {
            return (int) HOST_REGISTER.invokeExact(pointer, bytes, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int hostUnregister(Object pointer) {
        try {
            return (int) HOST_UNREGISTER.invokeExact(pointer);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int memcpy(Object dst, Object src, long bytes, int kind) {
        try {
            return (int) MEMCPY.invokeExact(dst, src, bytes, kind);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int memcpyAsync(Object dst, Object src, long bytes, int kind, Object stream) {
        try {
            return (int) MEMCPY_ASYNC.invokeExact(dst, src, bytes, kind, stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static Object newStream() {
        try {
            return (Object) NEW_STREAM.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int streamCreate(Object streamOut, int flags) {
        try {
            return (int) STREAM_CREATE.invokeExact(streamOut, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int streamSynchronize(Object stream) {
        try {
            return (int) STREAM_SYNC.invokeExact(stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int streamQuery(Object stream) {
        try {
            return (int) STREAM_QUERY.invokeExact(stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int streamDestroy(Object stream) {
        try {
            return (int) STREAM_DESTROY.invokeExact(stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int streamWaitEvent(Object stream, Object event) {
        try {
            return (int) STREAM_WAIT_EVENT.invokeExact(stream, event, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static Object newEvent() {
        try {
            return (Object) NEW_EVENT.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int eventCreate(Object eventOut, int flags) {
        try {
            return (int) EVENT_CREATE.invokeExact(eventOut, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int eventRecord(Object event, Object stream) {
        try {
            return (int) EVENT_RECORD.invokeExact(event, stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int eventQuery(Object event) {
        try {
            return (int) EVENT_QUERY.invokeExact(event);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int eventSynchronize(Object event) {
        try {
            return (int) EVENT_SYNC.invokeExact(event);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int eventDestroy(Object event) {
        try {
            return (int) EVENT_DESTROY.invokeExact(event);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Fills {@code typeAndDevice} with {@code cudaPointerAttributes.type} and {@code .device}. */
    static int pointerAttributes(long address, int[] typeAndDevice) {
        try {
            Object attrs = (Object) NEW_ATTRIBUTES.invokeExact();
            int rc = (int) POINTER_ATTRIBUTES.invokeExact(attrs, pointer(address));
            if (rc == CudaError.SUCCESS) {
                typeAndDevice[0] = (int) ATTR_TYPE.invokeExact(attrs);
                typeAndDevice[1] = (int) ATTR_DEVICE.invokeExact(attrs);
            }
            return rc;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int memGetInfo(long[] free, long[] total) {
        try {
            return (int) MEM_GET_INFO.invokeExact(free, total);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static String deviceName(int device) {
        try {
            return (String) DEVICE_NAME.invokeExact(device);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * JCuda throws only for misuse (null arguments) or when someone enabled its exceptions
     * process-wide; neither is a CUDA status, so it surfaces as an unchecked exception.
     */
    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException re) {
            throw re;
        }
        if (t instanceof Error e) {
            throw e;
        }
        throw new IllegalStateException("JCuda call failed: " + t, t);
    }
}
