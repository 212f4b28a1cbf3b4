package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.internal.json.Json;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The {@code bin/mooncake4j} commands in the code blocks of docs/model.md and docs/serving.md name a
 * command that exists, flags it accepts and a {@code --kv-transfer-config} that is JSON; the serve
 * commands of docs/model.md (which run on one machine as written) pick the {@code tcp} protocol, so
 * they do not stop on a machine without RDMA. The commands that need nothing but this repository are
 * run by {@code ModelDemoTest} and {@code ModelProcessDemoTest}.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class ModelDocCommandsTest {

    private static final Pattern BLOCK = Pattern.compile("```[a-z]*\\n(.*?)```", Pattern.DOTALL);

    @Test
    void modelDocCommandsParse() throws Exception {
        List<List<String>> cmds = commands(Path.of("../docs/model.md"));
        assertTrue(cmds.size() >= 7, "commands found: " + cmds);
        int serves = 0;
        for (List<String> c : cmds) {
            check(c);
            if (c.get(1).equals("serve") && c.contains("--model")) {
                serves++;
                String cfg = c.get(c.indexOf("--kv-transfer-config") + 1);
                @SuppressWarnings("unchecked")
                Map<String, Object> extra = (Map<String, Object>) Json.parseObject(cfg).get("kv_connector_extra_config");
                assertNotNull(extra, "docs/model.md: " + c);
                assertEquals("tcp", extra.get("mooncake_protocol"), "docs/model.md: " + c);
            }
        }
        assertTrue(serves >= 1);
    }

    @Test
    void servingDocCommandsParse() throws Exception {
        List<List<String>> cmds = commands(Path.of("../docs/serving.md"));
        assertTrue(cmds.size() >= 5, "commands found: " + cmds);
        for (List<String> c : cmds) {
            check(c);
        }
    }

    private static void check(List<String> c) {
        String name = c.get(1);
        CliCommand cmd = Main.commands().stream().filter(x -> x.name().equals(name)).findFirst().orElse(null);
        assertNotNull(cmd, "no command '" + name + "': " + c);
        Flags f = Flags.parse(c.subList(2, c.size()));
        if (!cmd.flagNames().isEmpty()) {
            try {
                f.rejectUnknown(cmd.flagNames());
            } catch (RuntimeException e) {
                throw new AssertionError(c + ": " + e.getMessage(), e);
            }
        }
        if (f.has("kv-transfer-config")) {
            Json.parseObject(f.string("kv-transfer-config", null)); // JSON, or it throws naming the offset
        }
    }

    /** The {@code bin/mooncake4j} commands of the doc's code blocks, split as a POSIX shell would. */
    static List<List<String>> commands(Path doc) throws Exception {
        List<List<String>> out = new ArrayList<>();
        Matcher m = BLOCK.matcher(Files.readString(doc, StandardCharsets.UTF_8));
        while (m.find()) {
            for (List<String> words : split(m.group(1))) {
                int i = 0;
                while (i < words.size() && words.get(i).matches("[A-Z_][A-Z0-9_]*=.*")) {
                    i++; // environment assignments
                }
                if (i < words.size() && words.get(i).equals("bin/mooncake4j") && i + 1 < words.size()) {
                    out.add(words.subList(i, words.size()));
                }
            }
        }
        return out;
    }

    /** Commands of a block: quotes, backslash-newline continuations and comments handled. */
    private static List<List<String>> split(String text) {
        List<List<String>> cmds = new ArrayList<>();
        List<String> words = new ArrayList<>();
        StringBuilder w = null;
        char quote = 0;
        for (int i = 0; i < text.length(); i++) {
            char ch = text.charAt(i);
            if (quote != 0) {
                if (ch == quote) {
                    quote = 0;
                } else {
                    w.append(ch);
                }
            } else if (ch == '\'' || ch == '"') {
                quote = ch;
                w = w == null ? new StringBuilder() : w;
            } else if (ch == '\\' && i + 1 < text.length() && text.charAt(i + 1) == '\n') {
                i++;
            } else if (ch == '#' && w == null) {
                while (i + 1 < text.length() && text.charAt(i + 1) != '\n') {
                    i++;
                }
            } else if (ch == ' ' || ch == '\t' || ch == '\n') {
                if (w != null) {
                    words.add(w.toString());
                    w = null;
                }
                if (ch == '\n' && !words.isEmpty()) {
                    cmds.add(words);
                    words = new ArrayList<>();
                }
            } else {
                w = w == null ? new StringBuilder() : w;
                w.append(ch);
            }
        }
        if (w != null) {
            words.add(w.toString());
        }
        if (!words.isEmpty()) {
            cmds.add(words);
        }
        return cmds;
    }
}
