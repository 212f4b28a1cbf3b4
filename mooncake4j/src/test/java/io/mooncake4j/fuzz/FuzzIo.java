package io.mooncake4j.fuzz;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.Arrays;
import java.util.Random;

/** Raw-socket helpers shared by the fuzz targets: one exchange per connection, bounded in time. */
final class FuzzIo {

    static final InetAddress LOOPBACK = InetAddress.getLoopbackAddress();
    /** How long a port may take to answer or close after the fuzzer stopped sending. */
    static final int ANSWER_TIMEOUT_MS = 10_000;

    private FuzzIo() {
    }

    /** What came back: the bytes, and whether the port closed (EOF or reset) rather than stalling. */
    record Reply(byte[] bytes, boolean reset) {
    }

    /**
     * Connects, writes {@code request} (ignoring a reset while writing: the port may reject early),
     * half-closes, and reads until the port closes; {@link AssertionError} if it neither answers nor
     * closes within {@link #ANSWER_TIMEOUT_MS}. The socket is closed with a reset so that tens of
     * thousands of cases leave no TIME_WAIT behind.
     */
    static Reply exchange(int port, byte[] request, int maxReply) throws IOException {
        try (Socket s = new Socket()) {
            s.setSoLinger(true, 0);
            s.connect(new InetSocketAddress(LOOPBACK, port), 5_000);
            s.setSoTimeout(ANSWER_TIMEOUT_MS);
            boolean reset = false;
            try {
                OutputStream out = s.getOutputStream();
                out.write(request);
                out.flush();
                s.shutdownOutput();
            } catch (IOException e) {
                reset = true;
            }
            InputStream in = s.getInputStream();
            byte[] buf = new byte[Math.max(64, Math.min(maxReply, 1 << 16))];
            int n = 0;
            try {
                while (true) {
                    if (n == buf.length) {
                        if (buf.length >= maxReply) {
                            throw new AssertionError("reply larger than " + maxReply + " bytes");
                        }
                        buf = Arrays.copyOf(buf, Math.min(maxReply, buf.length * 2));
                    }
                    int r = in.read(buf, n, buf.length - n);
                    if (r < 0) {
                        break;
                    }
                    n += r;
                }
            } catch (SocketTimeoutException e) {
                throw new AssertionError("port " + port + " neither answered nor closed within "
                        + ANSWER_TIMEOUT_MS + " ms after " + request.length + " request bytes");
            } catch (IOException e) {
                reset = true; // closed with a reset: fine
            }
            return new Reply(Arrays.copyOf(buf, n), reset);
        }
    }

    static byte[] randomBytes(Random r, int max) {
        byte[] b = new byte[r.nextInt(max + 1)];
        r.nextBytes(b);
        return b;
    }

    static byte[] concat(byte[]... parts) {
        int n = 0;
        for (byte[] p : parts) {
            n += p.length;
        }
        byte[] out = new byte[n];
        int o = 0;
        for (byte[] p : parts) {
            System.arraycopy(p, 0, out, o, p.length);
            o += p.length;
        }
        return out;
    }

    /** {@code b} with a few random bytes flipped, cut or duplicated. */
    static byte[] mutate(Random r, byte[] b) {
        byte[] out = b.clone();
        switch (r.nextInt(4)) {
            case 0 -> {
                for (int k = 0, n = 1 + r.nextInt(4); k < n && out.length > 0; k++) {
                    out[r.nextInt(out.length)] = (byte) r.nextInt(256);
                }
            }
            case 1 -> out = Arrays.copyOf(out, out.length == 0 ? 0 : r.nextInt(out.length));
            case 2 -> {
                if (out.length > 0) {
                    int at = r.nextInt(out.length);
                    out = concat(Arrays.copyOf(out, at), randomBytes(r, 16), Arrays.copyOfRange(out, at, out.length));
                }
            }
            default -> {
                // unchanged
            }
        }
        return out;
    }

    /** A random JSON-ish value: valid and broken numbers, strings, nesting. */
    static String jsonValue(Random r, int depth) {
        String[] atoms = {"0", "-0", "1", "-1", "1e999", "-1e999", "1e-999", "0.5", "3.0", "2147483648",
            "-2147483649", "99999999999999999999999", "NaN", "Infinity", "true", "false", "null", "\"\"",
            "\"0\"", "\" 7 \"", "\"x\"", "\"\\ud800\"", "\"\\u0000\"", "\"tcp://127.0.0.1:1\"", "01", "1.", ".1",
            "--1", "+1", "\"\\x\"", "[", "{", "]"};
        int k = depth > 3 ? 0 : r.nextInt(6);
        if (k == 4) {
            StringBuilder sb = new StringBuilder("[");
            for (int i = 0, n = r.nextInt(4); i < n; i++) {
                sb.append(i > 0 ? "," : "").append(jsonValue(r, depth + 1));
            }
            return sb.append(']').toString();
        }
        if (k == 5) {
            StringBuilder sb = new StringBuilder("{");
            for (int i = 0, n = r.nextInt(4); i < n; i++) {
                sb.append(i > 0 ? "," : "").append("\"k").append(i).append("\":").append(jsonValue(r, depth + 1));
            }
            return sb.append('}').toString();
        }
        return atoms[r.nextInt(atoms.length)];
    }
}
