package io.mooncake4j.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.mooncake4j.store.wire.SpType;
import io.mooncake4j.store.wire.StructPack;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Function ids and parameter-list hashes against the values the spec records from Mooncake's
 * headers and a running master (independent of our MD5 code path: the numbers are copied from
 * observations, not computed here).
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class MasterCodecTest {

    @Test
    void functionIdsMatchTheMaster() {
        Map<String, Integer> ids = Map.ofEntries(Map.entry("Ping", 0xd6c2dae5), Map.entry("ServiceReady", 0x7b81bb56),
                Map.entry("MountSegment", 0x3e7ec4bb), Map.entry("UnmountSegment", 0x6f10b465),
                Map.entry("ReMountSegment", 0x0b053b72), Map.entry("PutStart", 0x65ea9ac1),
                Map.entry("PutEnd", 0x8e8b2099), Map.entry("PutRevoke", 0xa0767c44),
                Map.entry("GetReplicaList", 0x1f7ef174), Map.entry("BatchGetReplicaList", 0x1b0d20ff),
                Map.entry("ExistKey", 0x89385f09), Map.entry("BatchExistKey", 0xb89fa6b0),
                Map.entry("Remove", 0xf1b09774), Map.entry("BatchRemove", 0x5902407d),
                Map.entry("BatchPutStart", 0x56be1822), Map.entry("BatchPutEnd", 0x80e020ab),
                Map.entry("BatchPutRevoke", 0xb82567aa));
        for (MasterCodec.Rpc r : MasterCodec.ALL) {
            if (ids.containsKey(r.name())) {
                assertEquals(ids.get(r.name()), r.id(), r.name());
            }
        }
        assertEquals(17, MasterCodec.ALL.stream().filter(r -> ids.containsKey(r.name())).count());
    }

    @Test
    void parameterListHashesMatchTheMaster() {
        Map<String, Integer> hashes = Map.ofEntries(Map.entry("Ping", 0x3c6d83e0), Map.entry("ExistKey", 0x7cf91ed8),
                Map.entry("GetReplicaList", 0x7cf91ed8), Map.entry("MountSegment", 0x9ef70dae),
                Map.entry("UnmountSegment", 0xd4c512e0), Map.entry("PutStart", 0xe385bd0e),
                Map.entry("PutEnd", 0xd1819222), Map.entry("PutRevoke", 0x1b7a228a), Map.entry("Remove", 0x18e89fee),
                Map.entry("ReMountSegment", 0xc6c66b88), Map.entry("BatchExistKey", 0x00f78d62),
                Map.entry("BatchGetReplicaList", 0x00f78d62), Map.entry("BatchPutStart", 0x5870c0a4),
                Map.entry("BatchPutEnd", 0xf57ea7c8), Map.entry("BatchRemove", 0x197a9ca0));
        for (MasterCodec.Rpc r : MasterCodec.ALL) {
            if (hashes.containsKey(r.name())) {
                assertEquals(String.format("%08x", hashes.get(r.name())), String.format("%08x", r.args().hash()), r.name());
            }
        }
    }

    @Test
    void existKeyRequestIsTheCompactForm() {
        byte[] body = MasterClient.body(MasterCodec.EXIST_KEY, w -> w.string("k1").string("default"));
        assertArrayEquals(HexFormat.of().parseHex("d81ef97c026b3107" + "64656661756c74"), body);
        assertArrayEquals(HexFormat.of().parseHex("fd800c800cff"), MasterCodec.EXIST_KEY.args().literal());
    }

    @Test
    void pingAnswerWithTypeLiteralDecodes() {
        byte[] ok = HexFormat.of().parseHex("538f2a740487fd0301ff0100" + "01" + "0700000000000000" + "01000000");
        Result<PingResult> r = StructPack.decode(ok, MasterCodec.PING.result(),
                x -> MasterCodec.expected(x, MasterCodec::ping));
        assertEquals(Result.ok(new PingResult(7, PingResult.OK)), r);
        byte[] err = HexFormat.of().parseHex("538f2a740487fd0301ff0100" + "00" + "99ffffff");
        Result<PingResult> e = StructPack.decode(err, MasterCodec.PING.result(),
                x -> MasterCodec.expected(x, MasterCodec::ping));
        assertEquals(ErrorCode.CLIENT_NOT_FOUND, e.errorCode());
        byte[] voidOk = HexFormat.of().parseHex("cd6828af0487fa010001");
        assertEquals(Result.ok(null), StructPack.decode(voidOk, MasterCodec.VOID, MasterCodec::expectedVoid));
        assertEquals("fd0404" + "8989ff", HexFormat.of().formatHex(MasterCodec.UUID.literal()));
        assertEquals(0xaf2868cc, SpType.hashOf(MasterCodec.VOID.literal()));
    }
}
