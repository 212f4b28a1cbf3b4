package io.mooncake4j.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.internal.json.Json;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Checks the frames captured from Mooncake's C++ engine ({@code src/test/resources/golden/cpp})
 * against the wire formats of {@code shared/spec/mooncake-transfer-engine.md} §2–§3, with a small
 * self-contained reader. The TCP engine's own codecs get their golden tests in their package; these
 * vectors pin down what a real C++ peer sends, so a misreading of the spec fails here.
 */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class MooncakeGoldenFramesTest {

    private static final long STATUS_MAGIC = 0x4D435456L;
    private static final long STATUS_OK = STATUS_MAGIC << 32;
    private static final long STATUS_ADDR_REJECTED = (STATUS_MAGIC << 32) | 1;
    private static final int HEADER_BYTES = 24;

    private static byte[] golden(String path) {
        try (InputStream in = MooncakeGoldenFramesTest.class.getResourceAsStream("/golden/cpp/" + path)) {
            assertNotNull(in, "missing golden file " + path);
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static ByteBuffer le(byte[] b) {
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** One handshake frame: the type byte (-1 = legacy) and the JSON text. */
    private record Frame(int type, String json) {}

    private static Frame handshakeFrame(byte[] bytes) {
        long length = le(bytes).getLong(0);
        assertEquals(bytes.length - 8, length, "length prefix covers exactly the rest of the frame");
        int first = bytes[8] & 0xFF;
        if (first <= 3) {
            return new Frame(first, new String(bytes, 9, bytes.length - 9, StandardCharsets.UTF_8));
        }
        assertEquals('{', first, "a frame without a type byte starts with the JSON object");
        return new Frame(-1, new String(bytes, 8, bytes.length - 8, StandardCharsets.UTF_8));
    }

    /** jsoncpp FastWriter output: compact, keys sorted, one trailing LF — and our writer reproduces it. */
    private static Map<String, Object> assertJsoncppForm(String json) {
        assertTrue(json.endsWith("\n"), "trailing LF");
        String body = json.substring(0, json.length() - 1);
        assertFalse(body.contains("\n"), "single line");
        Map<String, Object> parsed = Json.parseObject(body);
        assertEquals(body, Json.write(parsed, true), "byte-identical after a sorted compact re-encode");
        return parsed;
    }

    @Test
    void metadataExchangeCarriesBothDescriptorsAsTypeOneFrames() {
        Frame req = handshakeFrame(golden("passive/initiator-metadata.req"));
        Frame rep = handshakeFrame(golden("passive/target-metadata.rep"));
        assertEquals(1, req.type());
        assertEquals(1, rep.type());
        for (Frame f : List.of(req, rep)) {
            Map<String, Object> d = assertJsoncppForm(f.json());
            assertEquals("tcp", d.get("protocol"));
            assertEquals(2L, d.get("tcp_proto_version"));
            String name = (String) d.get("name");
            assertTrue(name.matches("127\\.0\\.0\\.1:\\d+"), name);
            long dataPort = (Long) d.get("tcp_data_port");
            assertTrue(dataPort >= 15000 && dataPort <= 17000, "data port from the RPC port range: " + dataPort);
            assertTrue(((String) d.get("timestamp")).matches("\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\.\\d{6}"));
            List<?> buffers = (List<?>) d.get("buffers");
            assertEquals(1, buffers.size());
            Map<?, ?> b = (Map<?, ?>) buffers.get(0);
            assertEquals(name, b.get("name"), "TCP buffers are named after the server");
            assertTrue((Long) b.get("addr") > 0);
            assertTrue((Long) b.get("length") > 0);
            assertEquals(List.of("addr", "length", "name"), List.copyOf(b.keySet()), "no rkey/lkey in TCP buffers");
        }
    }

    @Test
    void probeRequestAndReplyMatchTheWorkedBytes() {
        byte[] req = golden("active/hs-probe.req");
        assertArrayEquals(new byte[] {4, 0, 0, 0, 0, 0, 0, 0, 3, '{', '}', '\n'}, req);
        Frame rep = handshakeFrame(golden("active/hs-probe.rep"));
        assertEquals(3, rep.type());
        assertEquals("{\"status\":\"success\"}\n", rep.json());
    }

    @Test
    void tcpOnlyNodeAnswersConnectionWithAnEmptyHandshakeDesc() {
        String empty = "{\"local_gid\":\"\",\"local_lid\":0,\"local_nic_path\":\"\",\"payload\":\"\","
                + "\"peer_nic_path\":\"\",\"qp_num\":[],\"reply_msg\":\"\"}\n";
        Frame rep = handshakeFrame(golden("active/hs-connection.rep"));
        assertEquals(0, rep.type());
        assertEquals(empty, rep.json());
        assertJsoncppForm(rep.json());
        Frame legacy = handshakeFrame(golden("active/hs-legacy-connection.rep"));
        assertEquals(-1, legacy.type(), "a legacy request gets a legacy reply");
        assertEquals(empty, legacy.json());
        assertEquals(-1, handshakeFrame(golden("active/hs-legacy-connection.req")).type());
    }

    @Test
    void notifyIsAcknowledgedWithSuccess() {
        assertEquals(2, handshakeFrame(golden("active/hs-notify.req")).type());
        Frame rep = handshakeFrame(golden("active/hs-notify.rep"));
        assertEquals(2, rep.type());
        assertEquals("{\"name\":\"\",\"notify_msg\":\"success\"}\n", rep.json());
    }

    /** The 24-byte session header: size, addr, opcode; padding ignored. */
    private record Header(long size, long addr, int opcode) {
        boolean v2() {
            return (opcode & 0x80) != 0;
        }

        boolean write() {
            return (opcode & 0x7F) == 1;
        }
    }

    private static Header header(byte[] b, int offset) {
        ByteBuffer bb = le(b);
        return new Header(bb.getLong(offset), bb.getLong(offset + 8), b[offset + 16] & 0xFF);
    }

    private static long status(byte[] b, int offset) {
        return le(b).getLong(offset);
    }

    @Test
    void v2ReadIsHeaderThenStatusOkThenData() {
        byte[] req = golden("passive/v2-read-oneshot.req");
        assertEquals(HEADER_BYTES, req.length);
        Header h = header(req, 0);
        assertEquals(0x80, h.opcode());
        assertEquals(64, h.size());
        byte[] rep = golden("passive/v2-read-oneshot.rep");
        assertEquals(8 + 64, rep.length);
        assertEquals(STATUS_OK, status(rep, 0));
        assertArrayEquals(new byte[] {0, 0, 0, 0, 0x56, 0x54, 0x43, 0x4D}, java.util.Arrays.copyOf(rep, 8));
    }

    @Test
    void v2WriteIsHeaderAndBodyAcknowledgedByOneStatusFrame() {
        byte[] req = golden("passive/v2-write-oneshot.req");
        Header h = header(req, 0);
        assertEquals(0x81, h.opcode());
        assertEquals(HEADER_BYTES + h.size(), req.length);
        byte[] rep = golden("passive/v2-write-oneshot.rep");
        assertEquals(8, rep.length);
        assertEquals(STATUS_OK, status(rep, 0));
    }

    @Test
    void v1FramesHaveNoStatus() {
        Header r = header(golden("passive/v1-read-oneshot.req"), 0);
        assertEquals(0x00, r.opcode());
        assertEquals(r.size(), golden("passive/v1-read-oneshot.rep").length, "v1 read: data only");
        byte[] w = golden("passive/v1-write-oneshot.req");
        Header wh = header(w, 0);
        assertEquals(0x01, wh.opcode());
        assertEquals(HEADER_BYTES + wh.size(), w.length);
        assertEquals(0, golden("passive/v1-write-oneshot.rep").length, "v1 write: no acknowledgement");
    }

    @Test
    void addressOutsideBuffersIsRejectedWithStatusOne() {
        Header h = header(golden("active/data-v2-write-rejected.req"), 0);
        assertEquals(0x10, h.addr());
        assertTrue(h.v2() && h.write());
        byte[] rep = golden("active/data-v2-write-rejected.rep");
        assertEquals(8, rep.length);
        assertEquals(STATUS_ADDR_REJECTED, status(rep, 0));
        assertEquals(STATUS_MAGIC, status(rep, 0) >>> 32, "a valid frame carries the magic in the high half");
    }

    @Test
    void persistentLaneCarriesSequentialRequests() {
        for (String op : List.of("read", "write")) {
            byte[] req = golden("passive/v2-" + op + "-lane.req");
            byte[] rep = golden("passive/v2-" + op + "-lane.rep");
            int ro = 0;
            int so = 0;
            int n = 0;
            while (ro < req.length) {
                Header h = header(req, ro);
                assertTrue(h.v2(), op);
                assertEquals(op.equals("write"), h.write(), op);
                ro += HEADER_BYTES + (h.write() ? (int) h.size() : 0);
                assertEquals(STATUS_OK, status(rep, so), op + " request " + n);
                so += 8 + (h.write() ? 0 : (int) h.size());
                n++;
            }
            assertEquals(3, n);
            assertEquals(req.length, ro);
            assertEquals(rep.length, so, op + ": responses account for every byte");
        }
    }
}
