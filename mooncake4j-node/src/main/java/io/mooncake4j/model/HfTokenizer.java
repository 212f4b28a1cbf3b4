package io.mooncake4j.model;

import io.mooncake4j.internal.json.Json;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.text.Normalizer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.function.UnaryOperator;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The Hugging Face {@code tokenizer.json} BPE tokenizers of the Llama family, read and run by us
 * (Jlama 0.8.4's own tokenizer ignores Qwen2's NFC normalizer, maps only ASCII correctly at byte
 * level, strips the answer's leading space and runs in quadratic time in the length of a SentencePiece
 * prompt):
 *
 * <ul>
 *   <li><b>byte-level BPE</b> (GPT-2, Llama 3, Qwen2): a {@code ByteLevel} pre-tokenizer, alone or
 *       after a {@code Split} regex; every UTF-8 byte is a symbol;</li>
 *   <li><b>SentencePiece-style BPE</b> (Llama 2, Mistral): spaces become {@code ▁} (a {@code Prepend} +
 *       {@code Replace} normalizer, or a {@code Metaspace} pre-tokenizer), characters outside the
 *       vocabulary fall back to {@code <0xNN>} byte tokens ({@code byte_fallback});</li>
 *   <li>plain BPE over characters (the tiny model's).</li>
 * </ul>
 *
 * Added tokens ({@code added_tokens}) are matched in the text first. Anything else (another model
 * type such as {@code Unigram} or {@code WordPiece}, an unknown normalizer or pre-tokenizer, a
 * {@code Split} behaviour other than {@code Isolated}, subword prefixes, dropout) is refused at load
 * with an {@link IllegalArgumentException} naming it.
 *
 * <p>A beginning-of-sequence token is prepended when {@code tokenizer_config.json} says
 * {@code "add_bos_token": true} (Llama 2, Mistral) or when {@code tokenizer.json}'s post-processor is a
 * {@code TemplateProcessing} that starts with a special token (Llama 3); not otherwise (Qwen2). Decoding
 * skips special tokens and keeps a leading space (the text that follows a prompt, as vLLM returns it).
 *
 * <p>Immutable after {@link #load}; thread-safe.
 */
public final class HfTokenizer {

    private static final Pattern BYTE_TOKEN = Pattern.compile("<0x([0-9A-Fa-f]{2})>");
    /** GPT-2's pre-tokenizer regex (a {@code ByteLevel} pre-tokenizer with {@code use_regex}). */
    private static final String GPT2_REGEX =
            "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

    private final Map<String, Integer> vocab;
    private final String[] byId;
    /** (left id, right id) → {rank, merged id}. */
    private final Map<Long, int[]> merges;
    private final boolean byteFallback;
    private final boolean ignoreMerges;
    private final Integer unk;
    private final int[] byteTokens; // byte → <0xNN> id, or -1
    private final List<String> addedContents; // longest first
    private final Set<Character> addedFirstChars;
    private final Map<String, Integer> added;
    private final Set<Integer> special;
    private final UnaryOperator<String> normalizer;
    private final List<PreTokenizer> preTokenizers;
    private final boolean byteLevel;
    /** The SentencePiece space character to turn back into a space when decoding, or null. */
    private final String metaspace;
    private final Integer bos;
    private final String bosContent;
    private final String kind;

    private HfTokenizer(Builder b) {
        this.vocab = b.vocab;
        this.byId = b.byId;
        this.merges = b.merges;
        this.byteFallback = b.byteFallback;
        this.ignoreMerges = b.ignoreMerges;
        this.unk = b.unk;
        this.byteTokens = b.byteTokens;
        this.addedContents = b.addedContents;
        Set<Character> firsts = new HashSet<>();
        for (String a : b.addedContents) {
            firsts.add(a.charAt(0));
        }
        this.addedFirstChars = Set.copyOf(firsts);
        this.added = b.added;
        this.special = b.special;
        this.normalizer = b.normalizer;
        this.preTokenizers = b.preTokenizers;
        this.byteLevel = b.byteLevel;
        this.metaspace = b.metaspace;
        this.bos = b.bos;
        this.bosContent = b.bos == null ? null : b.byId[b.bos];
        this.kind = b.byteLevel ? "byte-level BPE" : b.metaspace != null ? "SentencePiece-style BPE"
                + (b.byteFallback ? " with byte fallback" : "") : "BPE";
    }

    /**
     * Reads {@code tokenizer.json} (and {@code tokenizer_config.json} when present) in {@code dir}.
     *
     * @throws IllegalArgumentException when a file cannot be read or uses a feature this class does not run
     */
    public static HfTokenizer load(Path dir) {
        Map<String, Object> tok = readObject(dir.resolve("tokenizer.json"));
        Path cfgFile = dir.resolve("tokenizer_config.json");
        Map<String, Object> cfg = Files.isRegularFile(cfgFile) ? readObject(cfgFile) : Map.of();
        Builder b = new Builder();
        b.model(object(tok.get("model"), "model"));
        b.addedTokens(tok.get("added_tokens"));
        b.normalizer = b.normalizer(tok.get("normalizer"));
        b.preTokenizer(tok.get("pre_tokenizer"));
        b.bos(cfg, tok.get("post_processor"));
        return new HfTokenizer(b);
    }

    private static Map<String, Object> readObject(Path f) {
        try {
            return Json.parseObject(Files.readString(f, StandardCharsets.UTF_8));
        } catch (IOException | RuntimeException e) {
            throw new IllegalArgumentException("cannot read " + f + ": " + e.getMessage(), e);
        }
    }

    /** What kind of tokenizer this is, for messages and docs, e.g. {@code byte-level BPE}. */
    public String kind() {
        return kind;
    }

    /** The id of the beginning-of-sequence token this tokenizer prepends, or null when it prepends none. */
    public Integer bosToken() {
        return bos;
    }

    /** Ids of the vocabulary and the added tokens (the highest id plus one). */
    public int size() {
        return byId.length;
    }

    /**
     * Encodes text: added tokens where they occur, BPE between them, the beginning-of-sequence token first
     * when this tokenizer adds one and the text does not already start with it (a chat template that
     * writes it).
     */
    public int[] encode(String text) {
        List<Integer> out = new ArrayList<>();
        if (bos != null && !text.startsWith(bosContent)) {
            out.add(bos);
        }
        int start = 0;
        boolean first = true;
        while (start <= text.length()) {
            int at = -1;
            String which = null;
            for (int i = start; i < text.length() && at < 0; i++) {
                if (!addedFirstChars.contains(text.charAt(i))) {
                    continue;
                }
                for (String a : addedContents) {
                    if (text.startsWith(a, i)) {
                        at = i;
                        which = a;
                        break;
                    }
                }
            }
            String plain = text.substring(start, at < 0 ? text.length() : at);
            if (!plain.isEmpty()) {
                encodePlain(plain, first, out);
            }
            first = false;
            if (at < 0) {
                break;
            }
            out.add(added.get(which));
            start = at + which.length();
        }
        int[] ids = new int[out.size()];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = out.get(i);
        }
        return ids;
    }

    private void encodePlain(String text, boolean atStart, List<Integer> out) {
        String s = normalizer.apply(text);
        List<String> pieces = List.of(s);
        for (PreTokenizer p : preTokenizers) {
            pieces = p.split(pieces, atStart);
        }
        for (String piece : pieces) {
            if (piece.isEmpty()) {
                continue;
            }
            Integer whole = vocab.get(piece);
            if (ignoreMerges && whole != null) {
                out.add(whole);
                continue;
            }
            bpe(piece, out);
        }
    }

    /** Byte-pair merges over one piece, lowest rank first (leftmost among equal ranks). */
    private void bpe(String piece, List<Integer> out) {
        List<Integer> sym = new ArrayList<>();
        piece.codePoints().forEach(cp -> {
            String c = Character.toString(cp);
            Integer id = vocab.get(c);
            if (id != null) {
                sym.add(id);
            } else if (byteFallback) {
                for (byte x : c.getBytes(StandardCharsets.UTF_8)) {
                    int bt = byteTokens[x & 0xff];
                    if (bt < 0) {
                        throw new IllegalArgumentException("the vocabulary has no byte token <0x"
                                + String.format(Locale.ROOT, "%02X", x & 0xff) + ">");
                    }
                    sym.add(bt);
                }
            } else if (unk != null) {
                sym.add(unk);
            } else {
                throw new IllegalArgumentException("the text has a character outside the vocabulary (U+"
                        + String.format(Locale.ROOT, "%04X", cp) + ") and the tokenizer has no unk_token");
            }
        });
        int n = sym.size();
        int[] id = new int[n];
        int[] prev = new int[n];
        int[] next = new int[n];
        for (int i = 0; i < n; i++) {
            id[i] = sym.get(i);
            prev[i] = i - 1;
            next[i] = i + 1 < n ? i + 1 : -1;
        }
        // entries: {rank, left position, left id, right id}
        PriorityQueue<int[]> q = new PriorityQueue<>((a, c) -> a[0] != c[0] ? Integer.compare(a[0], c[0])
                : Integer.compare(a[1], c[1]));
        for (int i = 0; i + 1 < n; i++) {
            push(q, i, id[i], id[i + 1]);
        }
        while (!q.isEmpty()) {
            int[] e = q.poll();
            int l = e[1];
            int r = next[l];
            if (id[l] != e[2] || r < 0 || id[r] != e[3]) {
                continue; // stale: a neighbour merged since
            }
            id[l] = merges.get(pair(e[2], e[3]))[1];
            id[r] = -1;
            next[l] = next[r];
            if (next[r] >= 0) {
                prev[next[r]] = l;
                push(q, l, id[l], id[next[l]]);
            }
            if (prev[l] >= 0) {
                push(q, prev[l], id[prev[l]], id[l]);
            }
        }
        for (int i = 0; i >= 0 && n > 0; i = next[i]) {
            out.add(id[i]);
        }
    }

    private void push(PriorityQueue<int[]> q, int pos, int a, int b) {
        int[] m = merges.get(pair(a, b));
        if (m != null) {
            q.add(new int[] {m[0], pos, a, b});
        }
    }

    private static long pair(int a, int b) {
        return ((long) a << 32) | (b & 0xffffffffL);
    }

    /**
     * Decodes {@code count} tokens to text, skipping special tokens and ids without a token (a model's
     * {@code vocab_size} may exceed the tokenizer's); bytes that do not form UTF-8 become U+FFFD, and a
     * character the last tokens only begin is left out until a later token completes it (as vLLM's
     * detokenizer holds it back).
     *
     * @throws IllegalArgumentException for a negative id
     */
    public String decode(int[] tokens, int count) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        for (int i = 0; i < count; i++) {
            int t = tokens[i];
            if (t < 0) {
                throw new IllegalArgumentException("token id " + t + " is negative");
            }
            if (t >= byId.length || byId[t] == null || special.contains(t)) {
                continue;
            }
            String s = byId[t];
            if (added.containsKey(s)) {
                bytes.writeBytes(s.getBytes(StandardCharsets.UTF_8));
            } else if (byteLevel) {
                for (int k = 0; k < s.length(); k++) {
                    Integer x = ByteLevel.DECODE.get(s.charAt(k));
                    if (x == null) {
                        bytes.writeBytes(Character.toString(s.charAt(k)).getBytes(StandardCharsets.UTF_8));
                    } else {
                        bytes.write(x);
                    }
                }
            } else {
                Matcher m = BYTE_TOKEN.matcher(s);
                if (byteFallback && m.matches()) {
                    bytes.write(Integer.parseInt(m.group(1), 16));
                } else {
                    bytes.writeBytes((metaspace == null ? s : s.replace(metaspace, " "))
                            .getBytes(StandardCharsets.UTF_8));
                }
            }
        }
        byte[] all = bytes.toByteArray();
        int end = completeLength(all);
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPLACE)
                    .onUnmappableCharacter(CodingErrorAction.REPLACE).decode(ByteBuffer.wrap(all, 0, end))
                    .toString();
        } catch (java.nio.charset.CharacterCodingException e) {
            throw new IllegalStateException(e); // REPLACE does not throw
        }
    }

    /** One pre-tokenizer: splits pieces further; {@code atStart} when the pieces begin the text. */
    @FunctionalInterface
    private interface PreTokenizer {
        List<String> split(List<String> pieces, boolean atStart);
    }

    /**
     * The length of {@code b} without a trailing UTF-8 sequence that the next token could still complete
     * (a lead byte followed by fewer continuation bytes than it announces): the text of a prefix of the
     * tokens is then a prefix of the text of all of them, so a stream can send what is new.
     */
    static int completeLength(byte[] b) {
        int n = b.length;
        for (int back = 1; back <= 3 && n - back >= 0; back++) {
            int x = b[n - back] & 0xff;
            if ((x & 0xC0) == 0x80) {
                continue; // a continuation byte: look further back for its lead
            }
            int need = x >= 0xF0 && x <= 0xF4 ? 4 : x >= 0xE0 && x <= 0xEF ? 3 : x >= 0xC2 && x <= 0xDF ? 2 : 1;
            return back < need ? n - back : n;
        }
        return n;
    }

    /** GPT-2's reversible byte ↔ printable-character map of byte-level BPE. */
    static final class ByteLevel {
        static final char[] ENCODE = new char[256];
        static final Map<Character, Integer> DECODE = new HashMap<>();

        static {
            int extra = 0;
            for (int c = 0; c < 256; c++) {
                boolean printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
                ENCODE[c] = printable ? (char) c : (char) (256 + extra++);
                DECODE.put(ENCODE[c], c);
            }
        }

        private ByteLevel() {}

        static String encode(String s) {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            StringBuilder o = new StringBuilder(b.length);
            for (byte x : b) {
                o.append(ENCODE[x & 0xff]);
            }
            return o.toString();
        }
    }

    /** Reads the parts of tokenizer.json; refuses what {@link HfTokenizer} does not run. */
    private static final class Builder {
        Map<String, Integer> vocab;
        String[] byId;
        Map<Long, int[]> merges;
        boolean byteFallback;
        boolean ignoreMerges;
        Integer unk;
        int[] byteTokens;
        List<String> addedContents = List.of();
        Map<String, Integer> added = Map.of();
        Set<Integer> special = Set.of();
        UnaryOperator<String> normalizer = UnaryOperator.identity();
        List<PreTokenizer> preTokenizers = new ArrayList<>();
        boolean byteLevel;
        String metaspace;
        Integer bos;

        void model(Map<String, Object> m) {
            String type = String.valueOf(m.get("type"));
            if (!type.equals("BPE")) {
                throw unsupported("tokenizer model type '" + type + "'", "BPE");
            }
            for (String k : List.of("continuing_subword_prefix", "end_of_word_suffix")) {
                if (m.get(k) != null && !"".equals(m.get(k))) {
                    throw unsupported("BPE " + k + " '" + m.get(k) + "'", "none");
                }
            }
            if (m.get("dropout") instanceof Number d && d.doubleValue() > 0) {
                throw unsupported("BPE dropout " + d, "none");
            }
            byteFallback = Boolean.TRUE.equals(m.get("byte_fallback"));
            ignoreMerges = Boolean.TRUE.equals(m.get("ignore_merges"));
            Map<String, Object> v = object(m.get("vocab"), "model.vocab");
            vocab = new HashMap<>(v.size() * 2);
            int max = -1;
            for (Map.Entry<String, Object> e : v.entrySet()) {
                int id = intValue(e.getValue(), "model.vocab");
                vocab.put(e.getKey(), id);
                max = Math.max(max, id);
            }
            byId = new String[max + 1];
            vocab.forEach((s, id) -> byId[id] = s);
            byteTokens = new int[256];
            java.util.Arrays.fill(byteTokens, -1);
            for (int x = 0; x < 256; x++) {
                Integer id = vocab.get(String.format(Locale.ROOT, "<0x%02X>", x));
                if (id != null) {
                    byteTokens[x] = id;
                }
            }
            if (m.get("unk_token") instanceof String u) {
                unk = vocab.get(u);
            }
            List<?> ms = m.get("merges") instanceof List<?> l ? l : List.of();
            merges = new HashMap<>(ms.size() * 2);
            for (int rank = 0; rank < ms.size(); rank++) {
                String a;
                String b;
                if (ms.get(rank) instanceof String s) {
                    int sp = s.indexOf(' ', 1);
                    if (sp < 0) {
                        throw new IllegalArgumentException("tokenizer.json: merge '" + s + "' is not two tokens");
                    }
                    a = s.substring(0, sp);
                    b = s.substring(sp + 1);
                } else if (ms.get(rank) instanceof List<?> p && p.size() == 2) {
                    a = String.valueOf(p.get(0));
                    b = String.valueOf(p.get(1));
                } else {
                    throw new IllegalArgumentException("tokenizer.json: merge " + ms.get(rank) + " is not two tokens");
                }
                Integer ia = vocab.get(a);
                Integer ib = vocab.get(b);
                Integer ic = vocab.get(a + b);
                if (ia == null || ib == null || ic == null) {
                    throw new IllegalArgumentException("tokenizer.json: merge '" + a + " " + b
                            + "' names a token outside the vocabulary");
                }
                merges.putIfAbsent(pair(ia, ib), new int[] {rank, ic});
            }
        }

        void addedTokens(Object o) {
            if (!(o instanceof List<?> list)) {
                return;
            }
            added = new HashMap<>();
            special = new HashSet<>();
            int max = byId.length - 1;
            for (Object x : list) {
                Map<String, Object> t = object(x, "added_tokens[]");
                String content = String.valueOf(t.get("content"));
                int id = intValue(t.get("id"), "added_tokens[].id");
                added.put(content, id);
                if (Boolean.TRUE.equals(t.get("special"))) {
                    special.add(id);
                }
                max = Math.max(max, id);
            }
            if (max >= byId.length) {
                byId = java.util.Arrays.copyOf(byId, max + 1);
            }
            added.forEach((s, id) -> {
                byId[id] = s;
                vocab.putIfAbsent(s, id);
            });
            List<String> contents = new ArrayList<>(added.keySet());
            contents.removeIf(String::isEmpty);
            contents.sort((a, b) -> Integer.compare(b.length(), a.length()));
            addedContents = List.copyOf(contents);
            special = Set.copyOf(special);
        }

        UnaryOperator<String> normalizer(Object o) {
            if (o == null) {
                return UnaryOperator.identity();
            }
            Map<String, Object> n = object(o, "normalizer");
            String type = String.valueOf(n.get("type"));
            return switch (type) {
                case "Sequence" -> {
                    List<UnaryOperator<String>> parts = new ArrayList<>();
                    for (Object x : list(n.get("normalizers"), "normalizer.normalizers")) {
                        parts.add(normalizer(x));
                    }
                    yield s -> {
                        for (UnaryOperator<String> p : parts) {
                            s = p.apply(s);
                        }
                        return s;
                    };
                }
                case "NFC", "NFD", "NFKC", "NFKD" -> {
                    Normalizer.Form f = Normalizer.Form.valueOf(type);
                    yield s -> Normalizer.normalize(s, f);
                }
                case "Prepend" -> {
                    String p = String.valueOf(n.get("prepend"));
                    noteMetaspace(p);
                    yield s -> p + s;
                }
                case "Replace" -> {
                    Map<String, Object> pat = object(n.get("pattern"), "normalizer Replace pattern");
                    if (!(pat.get("String") instanceof String from)) {
                        throw unsupported("normalizer Replace with a Regex pattern", "Replace of a String");
                    }
                    String to = String.valueOf(n.get("content"));
                    if (from.equals(" ")) {
                        noteMetaspace(to);
                    }
                    yield s -> s.replace(from, to);
                }
                default -> throw unsupported("tokenizer normalizer '" + type + "'",
                        "NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence");
            };
        }

        private void noteMetaspace(String s) {
            if (s.equals("\u2581")) {
                metaspace = s;
            }
        }

        void preTokenizer(Object o) {
            if (o == null) {
                return;
            }
            Map<String, Object> p = object(o, "pre_tokenizer");
            String type = String.valueOf(p.get("type"));
            switch (type) {
                case "Sequence" -> {
                    for (Object x : list(p.get("pretokenizers"), "pre_tokenizer.pretokenizers")) {
                        preTokenizer(x);
                    }
                }
                case "Split" -> {
                    Map<String, Object> pat = object(p.get("pattern"), "pre_tokenizer Split pattern");
                    String behavior = String.valueOf(p.get("behavior"));
                    if (!behavior.equals("Isolated") || Boolean.TRUE.equals(p.get("invert"))) {
                        throw unsupported("pre-tokenizer Split behaviour '" + behavior + "'"
                                + (Boolean.TRUE.equals(p.get("invert")) ? " inverted" : ""), "Isolated");
                    }
                    Pattern re = pat.get("Regex") instanceof String r ? compile(r)
                            : Pattern.compile(Pattern.quote(String.valueOf(pat.get("String"))));
                    preTokenizers.add((pieces, atStart) -> isolate(pieces, re));
                }
                case "ByteLevel" -> {
                    if (byteLevel) {
                        return;
                    }
                    byteLevel = true;
                    boolean prefix = Boolean.TRUE.equals(p.get("add_prefix_space"));
                    Pattern gpt2 = Boolean.FALSE.equals(p.get("use_regex")) ? null : compile(GPT2_REGEX);
                    preTokenizers.add((pieces, atStart) -> {
                        List<String> out = new ArrayList<>();
                        for (int i = 0; i < pieces.size(); i++) {
                            String s = pieces.get(i);
                            if (prefix && i == 0 && !s.startsWith(" ")) {
                                s = " " + s;
                            }
                            for (String x : gpt2 == null ? List.of(s) : isolate(List.of(s), gpt2)) {
                                out.add(ByteLevel.encode(x));
                            }
                        }
                        return out;
                    });
                }
                case "Metaspace" -> {
                    String rep = String.valueOf(p.getOrDefault("replacement", "\u2581"));
                    String scheme = String.valueOf(p.getOrDefault("prepend_scheme",
                            Boolean.FALSE.equals(p.get("add_prefix_space")) ? "never" : "always"));
                    if (Boolean.TRUE.equals(p.get("split"))) {
                        throw unsupported("pre-tokenizer Metaspace with split", "Metaspace with split false");
                    }
                    noteMetaspace(rep);
                    if (!List.of("always", "first", "never").contains(scheme)) {
                        throw unsupported("pre-tokenizer Metaspace prepend_scheme '" + scheme + "'",
                                "always, first, never");
                    }
                    preTokenizers.add((pieces, atStart) -> {
                        List<String> out = new ArrayList<>();
                        for (int i = 0; i < pieces.size(); i++) {
                            String s = pieces.get(i).replace(" ", rep);
                            // first: only the text's start, not a piece after an added token
                            boolean prepend = scheme.equals("always") || (scheme.equals("first") && atStart && i == 0);
                            out.add(prepend && !s.startsWith(rep) ? rep + s : s);
                        }
                        return out;
                    });
                }
                default -> throw unsupported("tokenizer pre-tokenizer '" + type + "'",
                        "ByteLevel, Split (Isolated), Metaspace, Sequence");
            }
        }

        void bos(Map<String, Object> cfg, Object postProcessor) {
            String content = null;
            if (Boolean.TRUE.equals(cfg.get("add_bos_token"))) {
                Object b = cfg.get("bos_token");
                if (b instanceof Map<?, ?> m) {
                    b = m.get("content");
                }
                if (!(b instanceof String s)) {
                    throw new IllegalArgumentException("tokenizer_config.json has add_bos_token but no bos_token");
                }
                content = s;
            } else if (!cfg.containsKey("add_bos_token")) {
                content = templateBos(postProcessor);
            }
            if (content != null) {
                bos = vocab.get(content);
                if (bos == null) {
                    throw new IllegalArgumentException("the beginning-of-sequence token '" + content
                            + "' is not in the tokenizer's vocabulary");
                }
            }
        }

        /**
         * The special token a {@code TemplateProcessing} post-processor (alone, or in a {@code Sequence} as
         * Llama 3.1's) puts before a single sequence, or null.
         */
        private static String templateBos(Object postProcessor) {
            if (!(postProcessor instanceof Map<?, ?> pp)) {
                return null;
            }
            if ("Sequence".equals(pp.get("type")) && pp.get("processors") instanceof List<?> ps) {
                for (Object p : ps) {
                    String b = templateBos(p);
                    if (b != null) {
                        return b;
                    }
                }
                return null;
            }
            if ("TemplateProcessing".equals(pp.get("type")) && pp.get("single") instanceof List<?> single
                    && !single.isEmpty() && single.getFirst() instanceof Map<?, ?> first
                    && first.get("SpecialToken") instanceof Map<?, ?> st) {
                return String.valueOf(st.get("id"));
            }
            return null;
        }

        private static Pattern compile(String regex) {
            try {
                return Pattern.compile(regex, Pattern.UNICODE_CHARACTER_CLASS);
            } catch (java.util.regex.PatternSyntaxException e) {
                throw unsupported("pre-tokenizer regex " + regex + " (" + e.getDescription() + ")",
                        "regexes Java can compile");
            }
        }

        /** Splits each piece into the regex's matches and the text between them (behaviour Isolated). */
        private static List<String> isolate(List<String> pieces, Pattern re) {
            List<String> out = new ArrayList<>();
            for (String s : pieces) {
                Matcher m = re.matcher(s);
                int last = 0;
                while (m.find()) {
                    if (m.start() > last) {
                        out.add(s.substring(last, m.start()));
                    }
                    if (m.end() > m.start()) {
                        out.add(m.group());
                    }
                    last = m.end();
                }
                if (last < s.length()) {
                    out.add(s.substring(last));
                }
            }
            return out;
        }

        private static IllegalArgumentException unsupported(String what, String supported) {
            return new IllegalArgumentException(what + " is not supported (supported: " + supported + ")");
        }
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> object(Object o, String what) {
        if (o instanceof Map<?, ?> m) {
            return (Map<String, Object>) m;
        }
        throw new IllegalArgumentException("tokenizer.json: " + what + " is not an object");
    }

    private static List<?> list(Object o, String what) {
        if (o instanceof List<?> l) {
            return l;
        }
        throw new IllegalArgumentException("tokenizer.json: " + what + " is not a list");
    }

    private static int intValue(Object o, String what) {
        if (o instanceof Number n && n.longValue() >= 0 && n.longValue() < Integer.MAX_VALUE) {
            return n.intValue();
        }
        throw new IllegalArgumentException("tokenizer.json: " + what + " has a bad id " + o);
    }
}
