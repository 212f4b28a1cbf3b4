import java.io.IOException;
import java.lang.classfile.Attributes;
import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.FieldModel;
import java.lang.classfile.MethodModel;
import java.lang.classfile.attribute.InnerClassInfo;
import java.lang.module.ModuleDescriptor;
import java.lang.reflect.AccessFlag;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;

/**
 * Counts the public API of the compiled module: exported packages (module-info.class), the
 * accessible types in them (public, and every enclosing type public or protected) and their
 * public and protected members (methods, constructors, fields; synthetic and bridge members not
 * counted; an enum's implicit values/valueOf and a record's accessors are counted, as javadoc lists
 * them). Reads class files only (java.lang.classfile), so no dependency has to be on a path.
 *
 * <pre>
 *   java scripts/ApiSurface.java mooncake4j/target/classes [--types] [--exclude io.mooncake4j.engine]
 * </pre>
 * {@code --exclude P} leaves out package P itself (not its sub-packages); {@code --types} prints
 * each type with its member count.
 */
public class ApiSurface {

    public static void main(String[] args) throws IOException {
        Path classes = Path.of(args.length > 0 ? args[0] : "mooncake4j/target/classes");
        boolean listTypes = false;
        Set<String> excluded = new TreeSet<>();
        for (int i = 1; i < args.length; i++) {
            switch (args[i]) {
                case "--types" -> listTypes = true;
                case "--exclude" -> excluded.add(args[++i]);
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        ModuleDescriptor module;
        try (var in = Files.newInputStream(classes.resolve("module-info.class"))) {
            module = ModuleDescriptor.read(in);
        }
        Set<String> exported = new TreeSet<>();
        for (ModuleDescriptor.Exports e : module.exports()) {
            if (!e.isQualified()) {
                exported.add(e.source());
            }
        }
        Map<String, ClassModel> all = new HashMap<>();
        try (Stream<Path> files = Files.walk(classes)) {
            for (Path f : (Iterable<Path>) files.filter(p -> p.toString().endsWith(".class"))::iterator) {
                if (f.getFileName().toString().equals("module-info.class")) {
                    continue;
                }
                ClassModel cm = ClassFile.of().parse(f);
                all.put(cm.thisClass().asInternalName(), cm);
            }
        }
        Map<String, int[]> perPackage = new TreeMap<>(); // package -> {types, members}
        Map<String, Integer> perType = new TreeMap<>();
        for (ClassModel cm : all.values()) {
            String name = cm.thisClass().asInternalName();
            String pkg = name.substring(0, name.lastIndexOf('/')).replace('/', '.');
            if (!exported.contains(pkg) || excluded.contains(pkg) || !accessible(name, all)) {
                continue;
            }
            int members = 0;
            for (MethodModel m : cm.methods()) {
                if (visible(m.flags().flags()) && !m.flags().has(AccessFlag.SYNTHETIC)
                        && !m.flags().has(AccessFlag.BRIDGE) && !m.methodName().stringValue().equals("<clinit>")) {
                    members++;
                }
            }
            for (FieldModel f : cm.fields()) {
                if (visible(f.flags().flags()) && !f.flags().has(AccessFlag.SYNTHETIC)) {
                    members++;
                }
            }
            int[] c = perPackage.computeIfAbsent(pkg, k -> new int[2]);
            c[0]++;
            c[1] += members;
            perType.put(name.replace('/', '.'), members);
        }
        int types = 0;
        int members = 0;
        System.out.printf(Locale.ROOT, "%-40s %6s %8s%n", "exported package", "types", "members");
        for (String pkg : exported) {
            if (excluded.contains(pkg)) {
                System.out.printf(Locale.ROOT, "%-40s %6s %8s%n", pkg, "-", "(excluded)");
                continue;
            }
            int[] c = perPackage.getOrDefault(pkg, new int[2]);
            System.out.printf(Locale.ROOT, "%-40s %6d %8d%n", pkg, c[0], c[1]);
            types += c[0];
            members += c[1];
        }
        System.out.printf(Locale.ROOT, "%-40s %6d %8d%n", "total: " + (exported.size() - excluded.stream()
                .filter(exported::contains).count()) + " packages", types, members);
        if (listTypes) {
            List<Map.Entry<String, Integer>> rows = new ArrayList<>(perType.entrySet());
            rows.sort(Map.Entry.<String, Integer>comparingByValue().reversed());
            for (Map.Entry<String, Integer> r : rows) {
                System.out.printf(Locale.ROOT, "  %4d %s%n", r.getValue(), r.getKey());
            }
        }
    }

    private static boolean visible(Set<AccessFlag> flags) {
        return flags.contains(AccessFlag.PUBLIC) || flags.contains(AccessFlag.PROTECTED);
    }

    /** Public, and (for a nested type) declared public or protected in an accessible type. */
    private static boolean accessible(String name, Map<String, ClassModel> all) {
        ClassModel cm = all.get(name);
        if (cm == null) {
            return false;
        }
        Optional<InnerClassInfo> self = cm.findAttribute(Attributes.innerClasses()).stream()
                .flatMap(a -> a.classes().stream())
                .filter(i -> i.innerClass().asInternalName().equals(name))
                .findFirst();
        if (self.isEmpty()) {
            return cm.flags().has(AccessFlag.PUBLIC);
        }
        InnerClassInfo info = self.get();
        if (info.outerClass().isEmpty() || !visible(info.flags())) {
            return false; // local or anonymous, or private / package-private nested
        }
        return accessible(info.outerClass().get().asInternalName(), all);
    }
}
