package sluice.sql;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.TableDescriptor;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.catalog.Catalog;
import org.apache.flink.table.catalog.CatalogBaseTable;
import org.apache.flink.table.catalog.ObjectPath;
import sluice.nexmark.NexmarkFlink;
import sluice.nexmark.NexmarkSource;
import sluice.nexmark.Stats;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Nexmark on Flink SQL at its best: the official query text (ddl_gen.sql,
 * ddl_views.sql, qN.sql of nexmark/nexmark) through Flink's planner and
 * runtime, over the shared generator (the 'nexmark' table, bit-identical to
 * sluice's), with the options the Nexmark project itself runs Flink with
 * (mini-batch 2 s / 50,000 rows, so two-phase aggregation; distinct-aggregate
 * splitting; object reuse).  The counterpart of bench/nexmark's DataStream
 * program and of sluice's `nexmark` driver: the same options, the same output
 * line (engine=flink-sql ...), read by bench/nexmark/run.sh.
 *
 *   java -cp sluice-sql-compiler.jar sluice.sql.NexmarkBench --queries-dir tests/data/sql/nexmark
 *        --query q5 --events 10M -p 2 [--backend hashmap|rocksdb] [--event-rate 1M]
 *        [--checkpoint-interval MS --checkpoint-dir D] [--no-tuning]
 *
 * The script's blackhole sink becomes a counting sink (as cheap as blackhole):
 * out= is the number of insert rows, updates= the number of update/delete rows
 * (0 for append-only queries, whose out= must equal the other engines' result
 * count).  Throughput as in NexmarkFlink: from the first generated event to
 * the end of the job, the whole JVM's CPU time; eps_per_core_2h: over the
 * second half of the events only.
 */
public final class NexmarkBench {
    public static void main(String[] args) throws Exception {
        String query = null, backend = "hashmap", ckDir = null, dir = null;
        long events = 10_000_000, ckMs = 0;
        double eventRate = 1e6;
        int p = 1;
        boolean tuning = true;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length && !a.equals("--no-tuning")) die("option " + a + " needs a value");
            switch (a) {
                case "--query": query = args[++i]; break;
                case "--queries-dir": dir = args[++i]; break;
                case "--events": events = NexmarkFlink.count(args[++i]); break;
                case "-p": case "--parallelism": p = (int) NexmarkFlink.count(args[++i]); break;
                case "--backend": backend = args[++i]; break;
                case "--checkpoint-interval": ckMs = NexmarkFlink.count(args[++i]); break;
                case "--checkpoint-dir": ckDir = args[++i]; break;
                case "--event-rate": eventRate = NexmarkFlink.count(args[++i]); break;
                case "--no-tuning": tuning = false; break;
                default: die("unknown argument '" + a + "'");
            }
        }
        if (query == null || dir == null) die("--query and --queries-dir are required");
        if (!backend.equals("hashmap") && !backend.equals("rocksdb")) die("--backend is hashmap or rocksdb");
        Path qf = Path.of(dir, query.toLowerCase(Locale.ROOT) + ".sql");
        if (!Files.isRegularFile(qf)) die(qf + ": no such query file");

        Configuration conf = new Configuration();
        conf.setString("parallelism.default", Integer.toString(p));
        conf.setString("state.backend.type", backend);
        conf.setString("taskmanager.memory.managed.size", "512m");
        conf.setString("pipeline.object-reuse", "true");
        if (tuning) {
            conf.setString("table.exec.mini-batch.enabled", "true");
            conf.setString("table.exec.mini-batch.allow-latency", "2s");
            conf.setString("table.exec.mini-batch.size", "50000");
            conf.setString("table.optimizer.distinct-agg.split.enabled", "true");
        }
        if (ckMs > 0) {
            conf.setString("execution.checkpointing.interval", ckMs + " ms");
            conf.setString("execution.checkpointing.mode", "EXACTLY_ONCE");
        }
        if (ckDir != null) {
            conf.setString("execution.checkpointing.storage", "filesystem");
            conf.setString("execution.checkpointing.dir", "file://" + ckDir);
            conf.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        }
        TableEnvironment tEnv = TableEnvironment.create(
                EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());

        Map<String, String> vars = new LinkedHashMap<>();
        vars.put("TPS", Long.toString((long) eventRate));
        vars.put("EVENTS_NUM", Long.toString(events));
        vars.put("PERSON_PROPORTION", "1");
        vars.put("AUCTION_PROPORTION", "3");
        vars.put("BID_PROPORTION", "46");
        vars.put("NEXMARK_TABLE", "datagen");
        List<Main.Stmt> stmts = new ArrayList<>();
        for (Path f : new Path[] {Path.of(dir, "ddl_gen.sql"), Path.of(dir, "ddl_views.sql"), qf})
            Main.split(f.toString(), Main.substitute(f.toString(), Files.readString(f, StandardCharsets.UTF_8), vars),
                    stmts);
        String insert = null;
        for (Main.Stmt s : stmts) {
            String head = s.text.trim().toUpperCase(Locale.ROOT);
            if (head.startsWith("INSERT ")) {
                if (insert != null) die(qf + ": more than one INSERT");
                insert = s.text;
            } else {
                tEnv.executeSql(s.text);
            }
        }
        if (insert == null) die(qf + ": no INSERT INTO");
        countSinks(tEnv);

        long w0 = System.nanoTime(), c0 = Stats.processCpuNs();
        tEnv.executeSql(insert).await();
        long w1 = System.nanoTime(), c1 = Stats.processCpuNs();
        long ws = NexmarkSource.FIRST_EMIT_NS.get(), cs = NexmarkSource.FIRST_CPU_NS.get();
        if (ws == 0) {
            ws = w0;
            cs = c0;
        }
        double wall = (w1 - ws) / 1e9, cpu = (c1 - cs) / 1e9;
        double load1 = java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
        StringBuilder sb = new StringBuilder(String.format(
                "engine=flink-sql query=%s backend=%s checkpoint_ms=%d p=%d events=%d wall_s=%.3f cpu_s=%.3f "
                        + "eps=%.0f eps_per_core=%.0f max_rss_mb=%.0f out=%d updates=%d tuning=%s job_wall_s=%.3f job_cpu_s=%.3f",
                query, backend, ckMs, p, events, wall, cpu, events / wall, events / cpu, Stats.peakRssMb(),
                CountTableFactory.INSERTS.get(), CountTableFactory.UPDATES.get(), tuning ? "nexmark" : "none",
                (w1 - w0) / 1e9, (c1 - c0) / 1e9));
        sb.append(NexmarkFlink.secondHalf(events, w1, c1));
        sb.append(String.format(" checkpoints=%d load1=%.2f", NexmarkFlink.lastCheckpoint(ckDir), load1));
        System.out.println(sb);
        System.exit(0);
    }

    static void die(String m) {
        System.err.println("nexmark-flink-sql: " + m);
        System.exit(2);
    }

    /** Replaces each blackhole / print sink table by a 'sluice-count' one of the same schema. */
    static void countSinks(TableEnvironment tEnv) throws Exception {
        Catalog cat = tEnv.getCatalog(tEnv.getCurrentCatalog()).orElseThrow();
        String db = tEnv.getCurrentDatabase();
        for (String name : tEnv.listTables()) {
            ObjectPath op = new ObjectPath(db, name);
            if (!cat.tableExists(op)) continue;
            CatalogBaseTable t = cat.getTable(op);
            if (t.getTableKind() != CatalogBaseTable.TableKind.TABLE) continue;
            String c = t.getOptions().get("connector");
            if (c == null || !(c.equals("blackhole") || c.equals("print"))) continue;
            Schema schema = Schema.newBuilder().fromResolvedSchema(tEnv.from("`" + name + "`").getResolvedSchema()).build();
            tEnv.createTemporaryTable("`" + name + "`", TableDescriptor.forConnector("sluice-count").schema(schema).build());
        }
    }
}
