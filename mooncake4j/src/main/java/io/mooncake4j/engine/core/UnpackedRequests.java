package io.mooncake4j.engine.core;

import io.mooncake4j.engine.TransferRequest;
import java.util.List;
import java.util.function.ToIntFunction;

/**
 * The requests of one {@code submitTransfer} call as parallel arrays (the form the transports'
 * submit paths take), with each opcode mapped to the transport's own code.
 *
 * @param size    number of requests
 * @param ops     opcode per request, in the engine's code
 * @param targets segment id per request
 * @param local   local address per request
 * @param remote  address in the target segment per request
 * @param lengths bytes per request
 */
public record UnpackedRequests(int size, int[] ops, long[] targets, long[] local, long[] remote, long[] lengths) {

    public static UnpackedRequests of(List<TransferRequest> requests, ToIntFunction<TransferRequest.Opcode> opCode) {
        int n = requests.size();
        int[] ops = new int[n];
        long[] targets = new long[n];
        long[] local = new long[n];
        long[] remote = new long[n];
        long[] lens = new long[n];
        for (int i = 0; i < n; i++) {
            TransferRequest r = requests.get(i);
            ops[i] = opCode.applyAsInt(r.opcode());
            targets[i] = r.targetId();
            local[i] = r.source();
            remote[i] = r.targetOffset();
            lens[i] = r.length();
        }
        return new UnpackedRequests(n, ops, targets, local, remote, lens);
    }
}
