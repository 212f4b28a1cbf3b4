package io.mooncake4j.internal.sys;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.Locale;

/**
 * Shareable memory and cross-process copies through FFM, Linux only: {@code memfd_create(2)} +
 * {@code ftruncate(2)} + {@code mmap(2)} ({@code MAP_SHARED}) for memory another process can map
 * through {@code /proc/<pid>/fd/<n>}, and {@code process_vm_writev(2)}/{@code process_vm_readv(2)}
 * for memory that is not shareable.
 *
 * <p>Every call reports failure with an {@link SysException} carrying {@code errno} and its name;
 * {@link #available()} says whether the downcalls could be linked at all (no native access, not
 * Linux, missing libc symbols). Stateless and thread-safe.
 */
public final class SharedMemory {

    /** {@code MFD_CLOEXEC}: the descriptor does not leak into exec'd children. */
    public static final int MFD_CLOEXEC = 1;

    private static final int PROT_READ = 1;
    private static final int PROT_WRITE = 2;
    private static final int MAP_SHARED = 1;
    private static final long MAP_FAILED = -1L;

    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    /** {@code struct iovec { void *iov_base; size_t iov_len; }}. */
    private static final StructLayout IOVEC = MemoryLayout.structLayout(ValueLayout.JAVA_LONG.withName("base"),
            ValueLayout.JAVA_LONG.withName("len"));

    private static final Handles H = Handles.link();

    private SharedMemory() {}

    /** A failed system call: the call's name, errno and what it was doing. */
    public static final class SysException extends RuntimeException {
        private static final long serialVersionUID = 1L;
        private final int errno;

        SysException(String call, int errno, String what) {
            super(String.format(Locale.ROOT, "%s failed (%s, errno %d) %s", call, errnoName(errno), errno, what));
            this.errno = errno;
        }

        SysException(String message) {
            super(message);
            this.errno = 0;
        }

        /** The errno value, 0 when the call could not be made at all. */
        public int errno() {
            return errno;
        }
    }

    private record Handles(MethodHandle memfdCreate, MethodHandle ftruncate, MethodHandle mmap, MethodHandle munmap,
            MethodHandle close, MethodHandle vmWritev, MethodHandle vmReadv, MethodHandle madvise, String unavailable) {

        static Handles link() {
            if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
                return unavailable("shareable memory needs Linux (memfd_create, process_vm_writev)");
            }
            try {
                Linker linker = Linker.nativeLinker();
                Linker.Option errno = Linker.Option.captureCallState("errno");
                var libc = linker.defaultLookup();
                MethodHandle memfd = linker.downcallHandle(libc.find("memfd_create").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT), errno);
                MethodHandle ftruncate = linker.downcallHandle(libc.find("ftruncate").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG), errno);
                MethodHandle mmap = linker.downcallHandle(libc.find("mmap").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                                ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
                                ValueLayout.JAVA_LONG), errno);
                MethodHandle munmap = linker.downcallHandle(libc.find("munmap").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG), errno);
                MethodHandle close = linker.downcallHandle(libc.find("close").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), errno);
                // ssize_t process_vm_writev(pid_t, const struct iovec *local, unsigned long liovcnt,
                //                           const struct iovec *remote, unsigned long riovcnt, unsigned long flags)
                FunctionDescriptor vm = FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT,
                        ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_LONG);
                MethodHandle writev = linker.downcallHandle(libc.find("process_vm_writev").orElseThrow(), vm, errno);
                MethodHandle readv = linker.downcallHandle(libc.find("process_vm_readv").orElseThrow(), vm, errno);
                MethodHandle madvise = linker.downcallHandle(libc.find("madvise").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                                ValueLayout.JAVA_INT), errno);
                return new Handles(memfd, ftruncate, mmap, munmap, close, writev, readv, madvise, null);
            } catch (RuntimeException e) { // IllegalCallerException without native access, a missing symbol
                return unavailable("cannot link libc for shareable memory: " + e);
            }
        }

        static Handles unavailable(String why) {
            return new Handles(null, null, null, null, null, null, null, null, why);
        }
    }

    /** Whether the calls are usable in this JVM. */
    public static boolean available() {
        return H.unavailable == null;
    }

    /** Why {@link #available()} is false, or null. */
    public static String unavailableReason() {
        return H.unavailable;
    }

    private static void require() {
        if (H.unavailable != null) {
            throw new SysException(H.unavailable);
        }
    }

    /** {@code memfd_create(name, flags)}: an anonymous file's descriptor. */
    public static int memfdCreate(String name, int flags) {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(CALL_STATE);
            int fd = (int) H.memfdCreate.invokeExact(state, a.allocateFrom(name), flags);
            if (fd < 0) {
                throw new SysException("memfd_create", errno(state), "creating '" + name + "'");
            }
            return fd;
        } catch (SysException e) {
            throw e;
        } catch (Throwable t) {
            throw new SysException("memfd_create: " + t);
        }
    }

    /** {@code ftruncate(fd, size)}. */
    public static void ftruncate(int fd, long size) {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(CALL_STATE);
            int rc = (int) H.ftruncate.invokeExact(state, fd, size);
            if (rc != 0) {
                throw new SysException("ftruncate", errno(state), "sizing fd " + fd + " to " + size + " B");
            }
        } catch (SysException e) {
            throw e;
        } catch (Throwable t) {
            throw new SysException("ftruncate: " + t);
        }
    }

    /** {@code mmap(NULL, length, PROT_READ|PROT_WRITE, MAP_SHARED, fd, offset)}: the address. */
    public static long mmapShared(int fd, long offset, long length) {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(CALL_STATE);
            long addr = (long) H.mmap.invokeExact(state, 0L, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
            if (addr == MAP_FAILED) {
                throw new SysException("mmap", errno(state), String.format(Locale.ROOT,
                        "mapping %d B at offset %d of fd %d", length, offset, fd));
            }
            return addr;
        } catch (SysException e) {
            throw e;
        } catch (Throwable t) {
            throw new SysException("mmap: " + t);
        }
    }

    /** {@code munmap(address, length)}. */
    public static void munmap(long address, long length) {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(CALL_STATE);
            int rc = (int) H.munmap.invokeExact(state, address, length);
            if (rc != 0) {
                throw new SysException("munmap", errno(state), String.format(Locale.ROOT,
                        "unmapping %d B at 0x%x", length, address));
            }
        } catch (SysException e) {
            throw e;
        } catch (Throwable t) {
            throw new SysException("munmap: " + t);
        }
    }

    /**
     * {@code madvise(address, length, MADV_POPULATE_WRITE)} (Linux 5.14+): faults every page of a
     * mapping in, writable, now rather than on first access. False when the kernel does not know the
     * advice (the caller may touch the pages itself); {@code address} must be page-aligned.
     */
    public static boolean populateWrite(long address, long length) {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(CALL_STATE);
            return (int) H.madvise.invokeExact(state, address, length, 23) == 0;
        } catch (Throwable t) {
            return false;
        }
    }

    /** {@code close(fd)}. */
    public static void close(int fd) {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(CALL_STATE);
            int rc = (int) H.close.invokeExact(state, fd);
            if (rc != 0) {
                throw new SysException("close", errno(state), "closing fd " + fd);
            }
        } catch (SysException e) {
            throw e;
        } catch (Throwable t) {
            throw new SysException("close: " + t);
        }
    }

    /**
     * Copies {@code length} bytes between this process's {@code local} and process {@code pid}'s
     * {@code remote} address with {@code process_vm_writev} ({@code write}) or
     * {@code process_vm_readv}, looping over partial transfers. Needs ptrace access to
     * {@code pid} (same user; Yama {@code ptrace_scope} 0, or a descendant / {@code PR_SET_PTRACER}).
     */
    public static void processVmCopy(boolean write, int pid, long local, long remote, long length) {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment state = a.allocate(CALL_STATE);
            MemorySegment liov = a.allocate(IOVEC);
            MemorySegment riov = a.allocate(IOVEC);
            long done = 0;
            while (done < length) {
                liov.set(ValueLayout.JAVA_LONG, 0, local + done);
                liov.set(ValueLayout.JAVA_LONG, 8, length - done);
                riov.set(ValueLayout.JAVA_LONG, 0, remote + done);
                riov.set(ValueLayout.JAVA_LONG, 8, length - done);
                long n = write ? (long) H.vmWritev.invokeExact(state, pid, liov, 1L, riov, 1L, 0L)
                        : (long) H.vmReadv.invokeExact(state, pid, liov, 1L, riov, 1L, 0L);
                if (n <= 0) {
                    int err = n < 0 ? errno(state) : 0;
                    throw new SysException(write ? "process_vm_writev" : "process_vm_readv", err,
                            String.format(Locale.ROOT, "copying %d B %s 0x%x in pid %d (%d B done)", length,
                                    write ? "to" : "from", remote, pid, done));
                }
                done += n;
            }
        } catch (SysException e) {
            throw e;
        } catch (Throwable t) {
            throw new SysException("process_vm copy: " + t);
        }
    }

    private static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    /** The symbolic name of the errno values these calls return. */
    static String errnoName(int errno) {
        return switch (errno) {
            case 1 -> "EPERM";
            case 3 -> "ESRCH";
            case 9 -> "EBADF";
            case 12 -> "ENOMEM";
            case 13 -> "EACCES";
            case 14 -> "EFAULT";
            case 22 -> "EINVAL";
            case 24 -> "EMFILE";
            case 38 -> "ENOSYS";
            default -> "errno";
        };
    }
}
