package sluice.sql;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.TableDescriptor;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.catalog.Catalog;
import org.apache.flink.table.catalog.CatalogBaseTable;
import org.apache.flink.table.catalog.ObjectPath;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * sluice's SQL compiler (sql/compiler/): reads Flink SQL scripts, runs their SET,
 * CREATE TABLE / VIEW / FUNCTION-less DDL in a streaming TableEnvironment and
 *
 *   compile [-o plan.json] [-D NAME=VALUE]... FILE...
 *       compiles the INSERT INTO statements (or the EXECUTE STATEMENT SET) with
 *       Flink's planner into Flink's compiled-plan JSON (FLIP-190) plus a
 *       "sluiceStatements" array (file, line and text of each INSERT), which
 *       sluice executes with no JVM (src/sql/);
 *   run [-p N] [--flink-sinks] [-D NAME=VALUE]... FILE...
 *       runs the script on Flink (a MiniCluster in this JVM) with every
 *       blackhole / print / filesystem sink table replaced by one that prints
 *       the rows in sluice's canonical form (RowFormat) on stdout: the reference
 *       of sluice's SQL tests (--flink-sinks: Flink's own sinks instead).
 *
 * Files are concatenated in order; ${NAME} is replaced by the -D value (the
 * official Nexmark DDL uses ${TPS}, ${EVENTS_NUM}, ...).  Errors go to stderr
 * as "FILE:LINE: message" and exit with status 1 (2: bad usage).
 */
public final class Main {
    /** One statement of a script, with where it starts. */
    static final class Stmt {
        final String file, text;
        final int line;     /* of its first token */
        final int textLine; /* of the first character of text: Flink's "line N" counts from there */

        Stmt(String file, int line, int textLine, String text) {
            this.file = file;
            this.line = line;
            this.textLine = textLine;
            this.text = text;
        }

        Stmt(String file, int line, String text) { this(file, line, line, text); }

        /** Flink's positions ("line 2, column 8") made positions in the file. */
        String fileLines(String msg) {
            Matcher m = Pattern.compile("line (\\d+), column (\\d+)").matcher(msg);
            StringBuilder b = new StringBuilder();
            while (m.find())
                m.appendReplacement(b, Matcher.quoteReplacement(
                        "line " + (textLine + Integer.parseInt(m.group(1)) - 1) + ", column " + m.group(2)));
            m.appendTail(b);
            return b.toString();
        }

        String where() { return file + ":" + line; }
    }

    static final class Failure extends Exception {
        Failure(String m) { super(m); }
    }

    public static void main(String[] args) {
        try {
            System.exit(run(args));
        } catch (Failure f) {
            System.err.println("error: " + f.getMessage());
            System.exit(1);
        }
    }

    static int usage() {
        System.err.println("usage: sluice-sql-compiler compile [-o plan.json] [-D NAME=VALUE]... FILE...\n"
                + "       sluice-sql-compiler run [-p N] [--flink-sinks] [-D NAME=VALUE]... FILE...");
        return 2;
    }

    static int run(String[] args) throws Failure {
        if (args.length < 1) return usage();
        String mode = args[0], out = null;
        int parallelism = 1;
        boolean flinkSinks = false;
        Map<String, String> vars = new LinkedHashMap<>();
        List<String> files = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            if ((a.equals("-o") || a.equals("-p") || a.equals("-D")) && i + 1 >= args.length) return usage();
            if (a.equals("-o")) out = args[++i];
            else if (a.equals("-p")) parallelism = Integer.parseInt(args[++i]);
            else if (a.equals("--flink-sinks")) flinkSinks = true;
            else if (a.equals("-D") || a.startsWith("-D")) {
                String kv = a.equals("-D") ? args[++i] : a.substring(2);
                int eq = kv.indexOf('=');
                if (eq <= 0) throw new Failure("-D wants NAME=VALUE, got '" + kv + "'");
                vars.put(kv.substring(0, eq), kv.substring(eq + 1));
            } else if (a.startsWith("-")) return usage();
            else files.add(a);
        }
        if (files.isEmpty() || !(mode.equals("compile") || mode.equals("run"))) return usage();

        List<Stmt> stmts = new ArrayList<>();
        for (String f : files) {
            String text;
            try {
                text = Files.readString(Path.of(f), StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new Failure(f + ": cannot read: " + e.getMessage());
            }
            split(f, substitute(f, text, vars), stmts);
        }

        EnvironmentSettings settings = EnvironmentSettings.newInstance().inStreamingMode().build();
        TableEnvironment tEnv = TableEnvironment.create(settings);
        tEnv.getConfig().getConfiguration().setString("parallelism.default", Integer.toString(parallelism));

        List<Stmt> inserts = new ArrayList<>();
        boolean inSet = false;
        Pattern set = Pattern.compile("(?is)SET\\s+'([^']*)'\\s*=\\s*'([^']*)'");
        for (Stmt s : stmts) {
            String t = s.text.trim();
            String head = t.toUpperCase(Locale.ROOT).replaceAll("\\s+", " ");
            try {
                if (head.startsWith("EXECUTE STATEMENT SET BEGIN")) {
                    inSet = true;
                    String first = t.substring(t.toUpperCase(Locale.ROOT).indexOf("BEGIN") + 5).trim();
                    if (!first.isEmpty()) inserts.add(new Stmt(s.file, s.line, first));
                } else if (head.equals("END")) {
                    if (!inSet) throw new Failure(s.where() + ": END without EXECUTE STATEMENT SET BEGIN");
                    inSet = false;
                } else if (head.startsWith("INSERT ")) {
                    inserts.add(s);
                } else if (inSet) {
                    throw new Failure(s.where() + ": only INSERT statements may stand in a statement set");
                } else if (head.startsWith("SET ")) {
                    Matcher m = set.matcher(t);
                    if (!m.matches()) throw new Failure(s.where() + ": SET wants 'key' = 'value'");
                    tEnv.getConfig().getConfiguration().setString(m.group(1), m.group(2));
                } else if (head.startsWith("CREATE ") || head.startsWith("DROP ") || head.startsWith("ALTER ")
                        || head.startsWith("USE ")) {
                    tEnv.executeSql(s.text); // untrimmed: Flink counts lines from textLine
                } else if (head.startsWith("SELECT ") || head.startsWith("WITH ")) {
                    throw new Failure(s.where() + ": a bare query has no sink; write INSERT INTO <table> " + "SELECT ...");
                } else {
                    throw new Failure(s.where() + ": unsupported statement: " + firstWords(t));
                }
            } catch (Failure f) {
                throw f;
            } catch (Exception e) {
                throw new Failure(s.where() + ": " + s.fileLines(message(e)));
            }
        }
        if (inSet) throw new Failure("EXECUTE STATEMENT SET BEGIN without END");
        if (inserts.isEmpty()) throw new Failure("no INSERT INTO statement: nothing to compile");

        if (mode.equals("compile")) {
            String json;
            try {
                json = compile(tEnv, inserts);
            } catch (Exception e) {
                throw new Failure(inserts.get(0).where() + ": " + inserts.get(0).fileLines(message(e)));
            }
            try {
                ObjectMapper om = new ObjectMapper();
                ObjectNode root = (ObjectNode) om.readTree(json);
                ArrayNode a = root.putArray("sluiceStatements");
                for (Stmt s : inserts) a.addObject().put("file", s.file).put("line", s.line).put("sql", s.text.trim());
                json = om.writerWithDefaultPrettyPrinter().writeValueAsString(root);
                if (out == null || out.equals("-")) System.out.println(json);
                else Files.writeString(Path.of(out), json + "\n", StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new Failure("cannot write the plan: " + e.getMessage());
            }
            return 0;
        }

        try {
            if (!flinkSinks) shadowSinks(tEnv);
            if (inserts.size() == 1) {
                tEnv.executeSql(inserts.get(0).text).await();
            } else {
                StatementSet ss = tEnv.createStatementSet();
                for (Stmt s : inserts) ss.addInsertSql(s.text);
                ss.execute().await();
            }
        } catch (Exception e) {
            throw new Failure(inserts.get(0).where() + ": " + message(e));
        }
        System.out.flush();
        return 0;
    }

    static String compile(TableEnvironment tEnv, List<Stmt> inserts) {
        if (inserts.size() == 1) return tEnv.compilePlanSql(inserts.get(0).text).asJsonString();
        StatementSet ss = tEnv.createStatementSet();
        for (Stmt s : inserts) ss.addInsertSql(s.text);
        return ss.compilePlan().asJsonString();
    }

    /** Replaces each blackhole / print / filesystem table by a 'sluice-collect' one of the same schema. */
    static void shadowSinks(TableEnvironment tEnv) throws Exception {
        Catalog cat = tEnv.getCatalog(tEnv.getCurrentCatalog()).orElseThrow();
        String db = tEnv.getCurrentDatabase();
        for (String name : tEnv.listTables()) {
            ObjectPath p = new ObjectPath(db, name);
            if (!cat.tableExists(p)) continue;
            CatalogBaseTable t = cat.getTable(p);
            if (t.getTableKind() != CatalogBaseTable.TableKind.TABLE) continue;
            String c = t.getOptions().get("connector");
            if (c == null || !(c.equals("blackhole") || c.equals("print") || c.equals("filesystem"))) continue;
            Schema schema = Schema.newBuilder().fromResolvedSchema(tEnv.from("`" + name + "`").getResolvedSchema()).build();
            tEnv.createTemporaryTable("`" + name + "`", TableDescriptor.forConnector("sluice-collect").schema(schema).build());
        }
    }

    static String message(Throwable e) {
        StringBuilder b = new StringBuilder(String.valueOf(e.getMessage()));
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause())
            if (c.getMessage() != null && !b.toString().contains(c.getMessage()) && !c.getMessage().contains(b))
                b.append(": ").append(c.getMessage());
        return b.toString().replace('\n', ' ');
    }

    static String firstWords(String t) {
        String[] w = t.split("\\s+");
        return w.length >= 2 ? w[0] + " " + w[1] : w[0];
    }

    static String substitute(String file, String text, Map<String, String> vars) throws Failure {
        Matcher m = Pattern.compile("\\$\\{([A-Za-z0-9_]+)\\}").matcher(text);
        StringBuilder b = new StringBuilder();
        while (m.find()) {
            String v = vars.get(m.group(1));
            if (v == null) {
                int line = 1;
                for (int i = 0; i < m.start(); i++) if (text.charAt(i) == '\n') line++;
                throw new Failure(file + ":" + line + ": ${" + m.group(1) + "} has no value (give -D " + m.group(1) + "=...)");
            }
            m.appendReplacement(b, Matcher.quoteReplacement(v));
        }
        m.appendTail(b);
        return b.toString();
    }

    /** Splits at ';' outside quotes, backquotes and comments; a statement's line is that of its first token. */
    static void split(String file, String s, List<Stmt> out) {
        StringBuilder cur = new StringBuilder();
        int line = 1, start = -1, textLine = 1, n = s.length();
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c == '-' && i + 1 < n && s.charAt(i + 1) == '-') {
                while (i < n && s.charAt(i) != '\n') i++;
                if (i < n) { line++; cur.append('\n'); }
                continue;
            }
            if (c == '/' && i + 1 < n && s.charAt(i + 1) == '*') {
                i += 2;
                while (i < n && !(s.charAt(i) == '*' && i + 1 < n && s.charAt(i + 1) == '/')) {
                    if (s.charAt(i) == '\n') { line++; cur.append('\n'); }
                    i++;
                }
                i++;
                cur.append(' ');
                continue;
            }
            if (c == ';') {
                if (start > 0) out.add(new Stmt(file, start, textLine, cur.toString()));
                cur.setLength(0);
                start = -1;
                textLine = line;
                continue;
            }
            if (!Character.isWhitespace(c) && start < 0) start = line;
            if (c == '\'' || c == '`' || c == '"') {
                cur.append(c);
                for (i++; i < n; i++) {
                    char d = s.charAt(i);
                    cur.append(d);
                    if (d == '\n') line++;
                    if (d == c) {
                        if (i + 1 < n && s.charAt(i + 1) == c) { cur.append(c); i++; continue; }
                        break;
                    }
                }
                continue;
            }
            if (c == '\n') line++;
            cur.append(c);
        }
        if (start > 0 && !cur.toString().isBlank()) out.add(new Stmt(file, start, textLine, cur.toString()));
    }
}
