package io.mooncake4j.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.store.wire.CoroRpcClient;
import io.mooncake4j.store.wire.SpType;
import io.mooncake4j.store.wire.StructPack;
import io.mooncake4j.store.wire.StructPackException;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A master that answers badly: wrong hashes, lengths up to 2^64, unknown variant indexes,
 * replies out of order or for nobody, broken headers, silence. Each is a clear error within the
 * call deadline, nothing is allocated from a wire length, and the client keeps working.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BadMasterRepliesTest {

    private static final Uuid ME = new Uuid(0x1111111111111111L, 0x2222222222222222L);
    private FakeMaster fake;
    private MasterClient client;

    @AfterEach
    void stop() throws IOException {
        if (client != null) {
            client.close();
        }
        if (fake != null) {
            fake.close();
        }
    }

    private void start(FakeMaster.Script script, Duration timeout) throws IOException {
        fake = new FakeMaster(script);
        client = new MasterClient(new CoroRpcClient(fake.address(), new CoroRpcClient.Options(Duration.ofSeconds(2),
                1 << 20, 64)), timeout, "default");
    }

    static byte[] existTrue() {
        return StructPack.encode(MasterCodec.EXIST_KEY.result(), w -> w.bool(true).bool(true));
    }

    /** The same value in the debug form a stock master sends: hash|1, meta 0x04, literal, NUL. */
    static byte[] withLiteral(SpType t, byte[] compact) {
        byte[] lit = t.literal();
        byte[] head = new byte[5];
        FakeMaster.put(head, 0, t.hash() | 1);
        head[4] = 0x04;
        byte[] payload = java.util.Arrays.copyOfRange(compact, 4, compact.length);
        return FakeMaster.concat(head, lit, new byte[] {0}, payload);
    }

    private static final byte[] GOOD = existTrue();

    @Test
    void wrongHashIsAClearErrorAndTheNextCallWorks() throws IOException {
        int[] n = {0};
        start(r -> {
            byte[] b = GOOD.clone();
            if (n[0]++ == 0) {
                b[1] ^= 0x40;
            }
            return FakeMaster.reply(r.seq(), 0, b);
        }, Duration.ofSeconds(5));
        StoreException e = assertThrows(StoreException.class, () -> client.existKey("k"));
        assertEquals(ErrorCode.RPC_FAIL.code(), e.errorCode());
        assertTrue(e.getMessage().contains("type hash"), e.getMessage());
        assertEquals(Result.ok(true), client.existKey("k"));
        assertEquals(1, fake.connections());
    }

    @Test
    void bothFormsAreAcceptedAndAWrongLiteralIsNot() throws IOException {
        SpType t = MasterCodec.EXIST_KEY.result();
        byte[] debug = withLiteral(t, GOOD);
        byte[] badLiteral = debug.clone();
        badLiteral[6] = 0x02; // the bool inside expected<bool, int32> becomes uint32
        List<byte[]> answers = List.of(debug, GOOD, badLiteral);
        int[] n = {0};
        start(r -> FakeMaster.reply(r.seq(), 0, answers.get(n[0]++ % 3)), Duration.ofSeconds(5));
        assertEquals(Result.ok(true), client.existKey("a"));
        assertEquals(Result.ok(true), client.existKey("b"));
        StoreException e = assertThrows(StoreException.class, () -> client.existKey("c"));
        assertTrue(e.getMessage().contains("type literal"), e.getMessage());
    }

    @Test
    void hugeLengthsAreRefusedWithoutAllocating() throws IOException {
        SpType t = MasterCodec.SERVICE_READY.result();
        // meta 0x18: 8-byte lengths; the version string claims 2^64 - 1 bytes
        byte[] huge = FakeMaster.concat(new byte[4], new byte[] {0x18, 1}, new byte[] {-1, -1, -1, -1, -1, -1, -1, -1});
        FakeMaster.put(huge, 0, t.hash() | 1);
        byte[] big = huge.clone();
        big[13] = 0x7f; // 2^63 - 1
        byte[] vec = StructPack.encode(MasterCodec.BATCH_EXIST_KEY.result(), w -> w.length(1).bool(true).bool(true));
        vec[4] = (byte) 200; // 200 elements announced, one present
        List<byte[]> bad = List.of(huge, big);
        int[] n = {0};
        start(r -> {
            if (r.functionId() == MasterCodec.BATCH_EXIST_KEY.id()) {
                return FakeMaster.reply(r.seq(), 0, vec);
            }
            int i = n[0]++;
            return FakeMaster.reply(r.seq(), 0, i < 2 ? bad.get(i)
                    : StructPack.encode(t, w -> w.bool(true).string("2.0.0")));
        }, Duration.ofSeconds(5));
        for (int i = 0; i < 2; i++) {
            StoreException e = assertThrows(StoreException.class, () -> client.serviceReady());
            assertTrue(e.getMessage().contains("elements") && e.getMessage().contains("bytes left"), e.getMessage());
        }
        StoreException v = assertThrows(StoreException.class, () -> client.batchExistKey(List.of("a")));
        assertTrue(v.getMessage().contains("container of 200 elements"), v.getMessage());
        assertEquals(Result.ok("2.0.0"), client.serviceReady());
    }

    @Test
    void unknownVariantIndexIsNamed() throws IOException {
        byte[] body = StructPack.encode(MasterCodec.GET_REPLICA_LIST.result(), w -> {
            w.bool(true).length(1).i64(7).u8(9).i32(3);
            w.i64(1000).bool(false);
        });
        start(r -> FakeMaster.reply(r.seq(), 0, body), Duration.ofSeconds(5));
        StoreException e = assertThrows(StoreException.class, () -> client.getReplicaList("k"));
        assertTrue(e.getMessage().contains("variant index 9"), e.getMessage());
    }

    @Test
    void repliesAreMatchedBySequenceNumberInAnyOrderAndStrangersAreDropped() throws IOException,
            InterruptedException {
        byte[][] held = new byte[1][];
        java.util.concurrent.CountDownLatch firstHeld = new java.util.concurrent.CountDownLatch(1);
        start(r -> {
            byte[] mine = FakeMaster.reply(r.seq(), 0, StructPack.encode(MasterCodec.PING.result(),
                    w -> w.bool(true).i64(r.seq()).i32(1)));
            if (held[0] == null) {
                held[0] = mine; // answer the first call after the second, after a reply for nobody
                firstHeld.countDown();
                return new byte[0];
            }
            byte[] stranger = FakeMaster.reply(r.seq() + 1000, 0, GOOD);
            byte[] first = held[0];
            held[0] = null;
            return FakeMaster.concat(stranger, mine, first);
        }, Duration.ofSeconds(5));
        CompletableFuture<Result<PingResult>> a = client.pingAsync(ME);
        // b only once the master holds a's request: a's sequence number is then b's less one (two calls made
        // back to back may reach the wire, and take their numbers, in either order)
        assertTrue(firstHeld.await(30, TimeUnit.SECONDS), "the master received the first call");
        CompletableFuture<Result<PingResult>> b = client.pingAsync(ME);
        long sa = a.join().value().viewVersionId();
        long sb = b.join().value().viewVersionId();
        assertEquals(sa + 1, sb, "each call got the reply with its own sequence number");
        assertEquals(1, client.rpc().unmatchedReplies());
    }

    @Test
    void brokenHeadersDropTheConnectionAndTheNextCallReconnects() throws IOException {
        int[] n = {0};
        start(r -> switch (n[0]++) {
            case 0 -> {
                byte[] f = FakeMaster.reply(r.seq(), 0, GOOD);
                f[0] = 0x16; // bad magic
                yield f;
            }
            case 1 -> {
                byte[] f = FakeMaster.reply(r.seq(), 0, new byte[0]);
                FakeMaster.put(f, 8, -1); // 4 GiB body announced
                yield f;
            }
            case 2 -> FakeMaster.thenClose(new byte[] {21, 0, 0}); // half a header, then the server closes
            case 3 -> null;
            default -> FakeMaster.reply(r.seq(), 0, GOOD);
        }, Duration.ofSeconds(5));
        for (String expect : List.of("magic", "exceeds", "lost", "lost")) {
            StoreException e = assertThrows(StoreException.class, () -> client.existKey("k"));
            assertEquals(ErrorCode.RPC_FAIL.code(), e.errorCode());
            assertTrue(e.getMessage().contains(expect), expect + " in " + e.getMessage());
        }
        assertEquals(Result.ok(true), client.existKey("k"));
        assertEquals(5, fake.connections());
        assertEquals(2, client.rpc().protocolErrors());
    }

    @Test
    void silenceEndsAtTheDeadlineAndALateReplyIsDropped() throws IOException {
        int[] n = {0};
        byte[][] late = new byte[1][];
        start(r -> {
            if (n[0]++ == 0) {
                late[0] = FakeMaster.reply(r.seq(), 0, GOOD);
                return new byte[0];
            }
            return FakeMaster.concat(late[0], FakeMaster.reply(r.seq(), 0, GOOD));
        }, Duration.ofMillis(300));
        long t0 = System.nanoTime();
        StoreException e = assertThrows(StoreException.class, () -> client.existKey("k"));
        long ms = (System.nanoTime() - t0) / 1_000_000;
        assertEquals(ErrorCode.RPC_TIMEOUT.code(), e.errorCode());
        assertTrue(ms >= 250 && ms < 5000, "timed out after " + ms + " ms");
        assertEquals(Result.ok(true), client.existKey("k"));
        assertEquals(1, client.rpc().unmatchedReplies());
    }

    @Test
    void remoteErrorsCarryTheirCodeAndMessage() throws IOException {
        start(r -> FakeMaster.reply(r.seq(), 4, StructPack.encode(SpType.STRING, w -> w.string("invalid rpc arg"))),
                Duration.ofSeconds(5));
        StoreException e = assertThrows(StoreException.class, () -> client.existKey("k"));
        assertEquals(ErrorCode.RPC_FAIL.code(), e.errorCode());
        assertTrue(e.getMessage().contains("rpc error 4 (invalid_rpc_arguments): invalid rpc arg"), e.getMessage());
    }

    @Test
    void fuzzedRepliesDecodeOrFailCleanly() {
        SpType t = MasterCodec.BATCH_GET_REPLICA_LIST.result();
        byte[] valid = StructPack.encode(t, w -> {
            w.length(2);
            w.bool(true).length(1).i64(1).u8(0).i64(4096).i64(0x7f0000000000L).string("tcp").string("127.0.0.1:17777")
                    .i32(3).i64(10_000).bool(true).i64(42);
            w.bool(false).i32(-704);
        });
        List<Result<ReplicaList>> ok = StructPack.decode(valid, t,
                r -> MasterCodec.list(r, 1, x -> MasterCodec.expected(x, MasterCodec::replicaList)));
        assertEquals(4096, ok.get(0).value().replicas().getFirst().size());
        assertEquals(ErrorCode.OBJECT_NOT_FOUND, ok.get(1).errorCode());
        Random rnd = new Random(28);
        int decoded = 0;
        for (int i = 0; i < 20_000; i++) {
            byte[] b = valid.clone();
            int flips = 1 + rnd.nextInt(4);
            for (int f = 0; f < flips; f++) {
                b[4 + rnd.nextInt(b.length - 4)] = (byte) rnd.nextInt(256);
            }
            int len = rnd.nextInt(8) == 0 ? rnd.nextInt(b.length + 1) : b.length;
            try {
                StructPack.decode(b, 0, len, t,
                        r -> MasterCodec.list(r, 1, x -> MasterCodec.expected(x, MasterCodec::replicaList)));
                decoded++;
            } catch (StructPackException expected) {
                assertTrue(expected.getMessage() != null && !expected.getMessage().isBlank());
            }
        }
        assertTrue(decoded > 0 && decoded < 20_000, "some mutations decode (payload bytes), most do not: " + decoded);
    }
}
