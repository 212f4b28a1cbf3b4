package io.mooncake4j.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.store.wire.StructPack;
import io.mooncake4j.store.wire.StructPackReader;
import java.io.IOException;
import java.io.InputStream;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Bytes captured from a real {@code mooncake_master} (src/test/resources/golden/store/README.md):
 * our encoder reproduces every request byte for byte, and every reply (in the form a stock master
 * sends: hash with the meta bit, the type literal) decodes to what the master meant.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class GoldenFilesTest {

    static byte[] golden(String name) throws IOException {
        try (InputStream in = GoldenFilesTest.class.getResourceAsStream("/golden/store/" + name)) {
            assertNotNull(in, "missing golden file " + name);
            return in.readAllBytes();
        }
    }

    @Test
    void requestsAreReproducedByteForByte() throws IOException {
        for (GoldenCapture.Step s : GoldenCapture.requests()) {
            assertArrayEquals(golden(s.name() + ".request.bin"), MasterClient.body(s.rpc(), s.args()), s.name());
        }
    }

    @Test
    void repliesDecode() throws IOException {
        Map<String, byte[]> replies = new LinkedHashMap<>();
        for (GoldenCapture.Step s : GoldenCapture.requests()) {
            replies.put(s.name(), golden(s.name() + ".reply.bin"));
        }
        checkReplies(replies);
    }

    private static <T> T decode(Map<String, byte[]> r, String name, MasterCodec.Rpc rpc, Function<StructPackReader, T> f) {
        byte[] b = r.get(name);
        assertEquals(1, b[0] & 1, name + ": a stock master sets the meta bit");
        assertEquals(0x04, b[4] & 0x04, name + ": and sends the type literal");
        return StructPack.decode(b, rpc.result(), f);
    }

    static void checkReplies(Map<String, byte[]> r) {
        Function<StructPackReader, Result<Void>> v = MasterCodec::expectedVoid;
        Result<String> version = decode(r, "01-ServiceReady", MasterCodec.SERVICE_READY,
                x -> MasterCodec.expected(x, StructPackReader::string));
        assertTrue(version.ok() && !version.value().isEmpty(), version.toString());
        assertEquals(PingResult.NEED_REMOUNT, decode(r, "02-Ping-need-remount", MasterCodec.PING,
                x -> MasterCodec.expected(x, MasterCodec::ping)).orThrow().clientStatus());
        assertTrue(decode(r, "03-MountSegment", MasterCodec.MOUNT_SEGMENT, v).ok());
        assertTrue(decode(r, "04-ReMountSegment", MasterCodec.REMOUNT_SEGMENT, v).ok());
        assertEquals(PingResult.OK, decode(r, "05-Ping-ok", MasterCodec.PING,
                x -> MasterCodec.expected(x, MasterCodec::ping)).orThrow().clientStatus());
        List<ReplicaDescriptor> put = decode(r, "06-PutStart", MasterCodec.PUT_START,
                x -> MasterCodec.expected(x, MasterCodec::replicas)).orThrow();
        ReplicaDescriptor d = put.getFirst();
        assertEquals(ReplicaDescriptor.Kind.MEMORY, d.kind());
        assertEquals(4096, d.size());
        assertEquals("127.0.0.1:17777", d.endpoint());
        assertEquals("tcp", d.protocol());
        assertEquals(ReplicaDescriptor.Status.PROCESSING, d.status());
        Segment s = GoldenCapture.SEGMENT;
        assertTrue(d.address() >= s.base() && d.address() + d.size() <= s.base() + s.size());
        assertTrue(decode(r, "07-PutEnd", MasterCodec.PUT_END, v).ok());
        assertEquals(Result.ok(true), decode(r, "08-ExistKey", MasterCodec.EXIST_KEY,
                x -> MasterCodec.expected(x, StructPackReader::bool)));
        ReplicaList rl = decode(r, "09-GetReplicaList", MasterCodec.GET_REPLICA_LIST,
                x -> MasterCodec.expected(x, MasterCodec::replicaList)).orThrow();
        assertEquals(10_000, rl.leaseTtlMs());
        assertEquals(ReplicaDescriptor.Status.COMPLETE, rl.replicas().getFirst().status());
        assertEquals(d.address(), rl.replicas().getFirst().address());
        assertEquals(ErrorCode.OBJECT_NOT_FOUND, decode(r, "10-GetReplicaList-missing", MasterCodec.GET_REPLICA_LIST,
                x -> MasterCodec.expected(x, MasterCodec::replicaList)).errorCode());
        List<Result<List<ReplicaDescriptor>>> bps = decode(r, "11-BatchPutStart", MasterCodec.BATCH_PUT_START,
                x -> MasterCodec.list(x, 1, y -> MasterCodec.expected(y, MasterCodec::replicas)));
        assertEquals(3, bps.size());
        assertEquals(10, bps.get(0).orThrow().getFirst().size());
        assertEquals(20, bps.get(1).orThrow().getFirst().size());
        assertEquals(ErrorCode.OBJECT_ALREADY_EXISTS, bps.get(2).errorCode());
        assertEquals(List.of(Result.ok(null)), decode(r, "12-BatchPutEnd", MasterCodec.BATCH_PUT_END,
                x -> MasterCodec.list(x, 1, MasterCodec::expectedVoid)));
        assertEquals(List.of(Result.ok(null)), decode(r, "13-BatchPutRevoke", MasterCodec.BATCH_PUT_REVOKE,
                x -> MasterCodec.list(x, 1, MasterCodec::expectedVoid)));
        assertTrue(decode(r, "14-PutStart-revoked", MasterCodec.PUT_START,
                x -> MasterCodec.expected(x, MasterCodec::replicas)).ok());
        assertTrue(decode(r, "15-PutRevoke", MasterCodec.PUT_REVOKE, v).ok());
        assertEquals(List.of(Result.ok(true), Result.ok(false), Result.ok(false)), decode(r, "16-BatchExistKey-longkey",
                MasterCodec.BATCH_EXIST_KEY, x -> MasterCodec.list(x, 1, y -> MasterCodec.expected(y, StructPackReader::bool))));
        List<Result<ReplicaList>> bgl = decode(r, "17-BatchGetReplicaList", MasterCodec.BATCH_GET_REPLICA_LIST,
                x -> MasterCodec.list(x, 1, y -> MasterCodec.expected(y, MasterCodec::replicaList)));
        assertEquals(10, bgl.get(0).orThrow().replicas().getFirst().size());
        assertEquals(ErrorCode.OBJECT_NOT_FOUND, bgl.get(1).errorCode());
        assertEquals(ErrorCode.OBJECT_HAS_LEASE, decode(r, "18-Remove-leased", MasterCodec.REMOVE, v).errorCode());
        List<Result<Void>> br = decode(r, "19-BatchRemove", MasterCodec.BATCH_REMOVE,
                x -> MasterCodec.list(x, 1, MasterCodec::expectedVoid));
        assertTrue(br.get(0).ok());
        assertEquals(ErrorCode.OBJECT_NOT_FOUND, br.get(1).errorCode());
        assertEquals(1L, decode(r, "20-RemoveAll", MasterCodec.REMOVE_ALL, StructPackReader::i64));
        assertTrue(decode(r, "21-UnmountSegment", MasterCodec.UNMOUNT_SEGMENT, v).ok());
    }
}
