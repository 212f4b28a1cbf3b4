package io.mooncake4j.connector.worker.plan;

import java.util.Locale;

/**
 * The TP facts of this worker and the heterogeneous-TP arithmetic of spec §6.2 and §6.10
 * (vLLM's {@code TransferTopology} in {@code kv_connector/utils.py} and the module functions
 * {@code _get_tp_ratio} / {@code _compute_sender_transfer_plan} of {@code mooncake_connector.py}).
 *
 * @param tpRank                   this worker's TP rank
 * @param tpSize                   this engine's TP size
 * @param mla                      the model uses MLA (one latent KV, replicated on every rank)
 * @param mamba                    the model has Mamba/GDN layers
 * @param totalNumKvHeads          the model's total number of KV heads ({@code >= 1})
 * @param virtuallySplitKvInBlocks Variant B region expansion (§6.6): every non-MLA, non-Mamba
 *                                 region becomes a K and a V region; false = Variant A (default)
 */
public record TransferTopology(int tpRank, int tpSize, boolean mla, boolean mamba, int totalNumKvHeads,
                               boolean virtuallySplitKvInBlocks) {

    public TransferTopology {
        if (tpSize < 1 || tpRank < 0 || tpRank >= tpSize) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "invalid TP rank/size: tp_rank=%d, tp_size=%d", tpRank, tpSize));
        }
        if (totalNumKvHeads < 1) {
            throw new IllegalArgumentException("totalNumKvHeads must be >= 1, got " + totalNumKvHeads);
        }
    }

    /** Variant A (no K/V split). */
    public TransferTopology(int tpRank, int tpSize, boolean mla, boolean mamba, int totalNumKvHeads) {
        this(tpRank, tpSize, mla, mamba, totalNumKvHeads, false);
    }

    /**
     * {@code local_tp // remote_tp} when this side has at least as many ranks, else
     * {@code -(remote_tp // local_tp)}.
     *
     * @throws TransferPlanningException when the larger size is not a multiple of the smaller
     */
    public int tpRatio(int remoteTpSize) {
        return tpRatio(tpSize, remoteTpSize);
    }

    /**
     * The peer ranks that pair with this rank: on P with D's TP size, the D ranks that may pull
     * from this rank; on D with P's TP size, the P ranks to pull from.
     */
    public int[] handshakeTargetRanks(int remoteTpSize) {
        int r = tpRatio(remoteTpSize);
        if (r > 0) {
            return new int[] {tpRank / r};
        }
        int a = -r;
        int[] ranks = new int[a];
        for (int i = 0; i < a; i++) {
            ranks[i] = tpRank * a + i;
        }
        return ranks;
    }

    /** True when every rank holds the whole KV (MLA, or more TP ranks than KV heads). */
    public boolean localReplicatesKvCache() {
        return mla || tpSize > totalNumKvHeads;
    }

    /**
     * The KV-head count given to the head re-sharding math, or 0 (vLLM's {@code None}) for MLA
     * and Mamba models.
     */
    public int headCountForResharding() {
        return (mla || mamba) ? 0 : totalNumKvHeads;
    }

    /** vLLM's {@code _get_tp_ratio(local_tp, remote_tp)}. */
    public static int tpRatio(int localTp, int remoteTp) {
        if (localTp < 1 || remoteTp < 1) {
            throw new TransferPlanningException(String.format(Locale.ROOT,
                    "Tensor parallel sizes must be positive, got local=%d, remote=%d.", localTp, remoteTp));
        }
        if (localTp >= remoteTp) {
            if (localTp % remoteTp != 0) {
                throw new TransferPlanningException(String.format(Locale.ROOT,
                        "Local tensor parallel size %d is not divisible by remote tensor parallel size %d.",
                        localTp, remoteTp));
            }
            return localTp / remoteTp;
        }
        if (remoteTp % localTp != 0) {
            throw new TransferPlanningException(String.format(Locale.ROOT,
                    "Remote tensor parallel size %d is not divisible by local tensor parallel size %d.",
                    remoteTp, localTp));
        }
        return -(remoteTp / localTp);
    }

    /**
     * vLLM's {@code _compute_sender_transfer_plan}: which bytes of each local block this P rank
     * writes into which part of each remote block.
     *
     * @param totalNumKvHeads the KV-head count for plain attention models, or {@code <= 0} for
     *                        vLLM's {@code None} (MLA or Mamba models)
     */
    public static SenderTransferPlan computeSenderTransferPlan(int localRank, int localTp, int remoteRank,
            int remoteTp, long localKvLen, long remoteKvLen, boolean producerReplicated, int totalNumKvHeads) {
        int r = tpRatio(localTp, remoteTp);
        if (r == 1) {
            return new SenderTransferPlan(true, 0, 0, localKvLen);
        }
        if (totalNumKvHeads > 0) {
            int h = totalNumKvHeads;
            boolean consumerReplicated = remoteTp > h;
            if (producerReplicated != consumerReplicated) {
                int localHeadCount = Math.max(h / localTp, 1);
                int localReplicaCount = Math.max(localTp / h, 1);
                long localHead = (long) localRank * h / localTp;
                long remoteHead = (long) remoteRank * h / remoteTp;
                long bytesPerHead = localKvLen / localHeadCount;
                return new SenderTransferPlan(localRank % localReplicaCount == 0,
                        Math.max(remoteHead - localHead, 0) * bytesPerHead,
                        Math.max(localHead - remoteHead, 0) * bytesPerHead,
                        bytesPerHead);
            }
        }
        if (r > 0) {
            if (producerReplicated) {
                return new SenderTransferPlan(localRank % r == 0, 0, 0, localKvLen);
            }
            return new SenderTransferPlan(true, 0, (localRank % r) * localKvLen, localKvLen);
        }
        if (producerReplicated) {
            return new SenderTransferPlan(true, 0, 0, localKvLen);
        }
        int a = -r;
        return new SenderTransferPlan(true, (remoteRank % a) * remoteKvLen, 0, remoteKvLen);
    }

    /**
     * vLLM's {@code resolve_need_send}: how many D pulls must succeed before P frees the blocks.
     *
     * @param pairedRemoteTpRanks number of D TP ranks that pair with this P rank
     * @param remotePpSize        D's PP size
     * @param localPpSize         this engine's PP size
     */
    public static int resolveNeedSend(int pairedRemoteTpRanks, int remotePpSize, int localPpSize) {
        int needSend = pairedRemoteTpRanks;
        if (remotePpSize > 1 && remotePpSize != localPpSize) {
            needSend *= remotePpSize;
        }
        return needSend;
    }

    /**
     * The P pairing check of {@code send_kv_to_decode}: null when D rank {@code remoteTpRank}
     * pairs with this rank, else the {@code ERROR} message to answer with.
     */
    public String pairingError(int remoteTpRank, int remoteTpSize) {
        int[] ranks = handshakeTargetRanks(remoteTpSize);
        for (int rank : ranks) {
            if (rank == remoteTpRank) {
                return null;
            }
        }
        return String.format(Locale.ROOT,
                "This D tp_rank %d is not paired with P tp_rank %d; expected one of %s.",
                remoteTpRank, tpRank, java.util.Arrays.toString(ranks));
    }
}
