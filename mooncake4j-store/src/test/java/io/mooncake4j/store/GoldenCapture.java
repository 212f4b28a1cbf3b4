package io.mooncake4j.store;

import io.mooncake4j.store.wire.CoroRpcClient;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The fixed call sequence whose request and reply bodies are the golden files under
 * {@code src/test/resources/golden/store/}: {@link GoldenFilesTest} re-encodes the requests from
 * {@link #requests()} and decodes the replies; {@code GoldenCaptureTest} runs it against a real master.
 */
final class GoldenCapture {

    static final Uuid CLIENT = new Uuid(0x1111111111111111L, 0x2222222222222222L);
    static final Segment SEGMENT = new Segment(new Uuid(0x3333333333333333L, 0x4444444444444444L), "127.0.0.1:17777",
            0x7f0000000000L, 64L << 20, "127.0.0.1:17777", "tcp", "");

    /** One step: a file name, the RPC, and its parameter writer. */
    record Step(String name, MasterCodec.Rpc rpc, Consumer<io.mooncake4j.store.wire.StructPackWriter> args) {}

    static List<Step> requests() {
        List<Step> s = new ArrayList<>();
        ReplicateConfig rc = ReplicateConfig.defaults();
        s.add(new Step("01-ServiceReady", MasterCodec.SERVICE_READY, w -> { }));
        s.add(new Step("02-Ping-need-remount", MasterCodec.PING, w -> MasterCodec.uuid(w, CLIENT)));
        s.add(new Step("03-MountSegment", MasterCodec.MOUNT_SEGMENT, w -> {
            MasterCodec.segment(w, SEGMENT);
            MasterCodec.uuid(w, CLIENT);
        }));
        s.add(new Step("04-ReMountSegment", MasterCodec.REMOUNT_SEGMENT, w -> {
            w.length(1);
            MasterCodec.segment(w, SEGMENT);
            MasterCodec.uuid(w, CLIENT);
        }));
        s.add(new Step("05-Ping-ok", MasterCodec.PING, w -> MasterCodec.uuid(w, CLIENT)));
        s.add(new Step("06-PutStart", MasterCodec.PUT_START, w -> {
            MasterCodec.uuid(w, CLIENT);
            w.string("k1").i64(4096);
            MasterCodec.replicateConfig(w, rc);
            w.string("default");
        }));
        s.add(new Step("07-PutEnd", MasterCodec.PUT_END, w -> {
            MasterCodec.uuid(w, CLIENT);
            MasterCodec.objectMeta(w, "k1", null);
            w.i32(4).string("default");
        }));
        s.add(new Step("08-ExistKey", MasterCodec.EXIST_KEY, w -> w.string("k1").string("default")));
        s.add(new Step("09-GetReplicaList", MasterCodec.GET_REPLICA_LIST, w -> w.string("k1").string("default")));
        s.add(new Step("10-GetReplicaList-missing", MasterCodec.GET_REPLICA_LIST, w -> w.string("nope").string("default")));
        s.add(new Step("11-BatchPutStart", MasterCodec.BATCH_PUT_START, w -> {
            MasterCodec.uuid(w, CLIENT);
            MasterCodec.strings(w, List.of("b1", "b2", "k1"));
            w.length(3).i64(10).i64(20).i64(30);
            MasterCodec.replicateConfig(w, rc.withHardPin(true).withGroupIds(List.of("g", "", "g")));
            w.string("default");
        }));
        s.add(new Step("12-BatchPutEnd", MasterCodec.BATCH_PUT_END, w -> {
            MasterCodec.uuid(w, CLIENT);
            w.length(1);
            MasterCodec.objectMeta(w, "b1", null);
            w.i32(4).string("default");
        }));
        s.add(new Step("13-BatchPutRevoke", MasterCodec.BATCH_PUT_REVOKE, w -> {
            MasterCodec.uuid(w, CLIENT);
            MasterCodec.strings(w, List.of("b2"));
            w.i32(4).string("default");
        }));
        s.add(new Step("14-PutStart-revoked", MasterCodec.PUT_START, w -> {
            MasterCodec.uuid(w, CLIENT);
            w.string("r1").i64(100);
            MasterCodec.replicateConfig(w, rc);
            w.string("default");
        }));
        s.add(new Step("15-PutRevoke", MasterCodec.PUT_REVOKE, w -> {
            MasterCodec.uuid(w, CLIENT);
            w.string("r1").i32(4).string("default");
        }));
        s.add(new Step("16-BatchExistKey-longkey", MasterCodec.BATCH_EXIST_KEY, w -> {
            MasterCodec.strings(w, List.of("b1", "b2", "x".repeat(300)));
            w.string("default");
        }));
        s.add(new Step("17-BatchGetReplicaList", MasterCodec.BATCH_GET_REPLICA_LIST, w -> {
            MasterCodec.strings(w, List.of("b1", "b2"));
            w.string("default");
        }));
        s.add(new Step("18-Remove-leased", MasterCodec.REMOVE, w -> w.string("k1").bool(false).string("default")));
        s.add(new Step("19-BatchRemove", MasterCodec.BATCH_REMOVE, w -> {
            MasterCodec.strings(w, List.of("k1", "b2"));
            w.bool(true).string("default");
        }));
        s.add(new Step("20-RemoveAll", MasterCodec.REMOVE_ALL, w -> w.bool(true).string("default")));
        s.add(new Step("21-UnmountSegment", MasterCodec.UNMOUNT_SEGMENT, w -> {
            MasterCodec.uuid(w, SEGMENT.id());
            MasterCodec.uuid(w, CLIENT);
        }));
        return s;
    }

    /** Runs the sequence against {@code master}, writing {@code NAME.request.bin} and {@code NAME.reply.bin}. */
    static Map<String, byte[]> capture(MasterProcess master, Path dir) throws IOException {
        Files.createDirectories(dir);
        Map<String, byte[]> replies = new LinkedHashMap<>();
        try (CoroRpcClient rpc = new CoroRpcClient(master.address(), CoroRpcClient.Options.defaults())) {
            for (Step s : requests()) {
                byte[] body = MasterClient.body(s.rpc(), s.args());
                byte[] reply = rpc.call(s.rpc().id(), body, Duration.ofSeconds(5)).join();
                Files.write(dir.resolve(s.name() + ".request.bin"), body);
                Files.write(dir.resolve(s.name() + ".reply.bin"), reply);
                replies.put(s.name(), reply);
            }
        }
        return replies;
    }
}
