package sluice.sql;

import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.TimestampType;

import java.io.Serializable;
import java.time.LocalDateTime;
import java.util.List;

/**
 * sluice's canonical text of a SQL row, the same as src/sql/sql_format.c writes:
 * the row kind (+I, -U, +U, -D), then each field after a '|': NULL as \N,
 * integers in decimal, BOOLEAN as TRUE/FALSE, DOUBLE/FLOAT as the hex of their
 * IEEE bits (exact), DECIMAL as plain text with its scale, TIMESTAMP(p) as
 * yyyy-MM-dd HH:mm:ss with p fraction digits, strings with \ | and newline
 * escaped as \\ \p \n.
 */
final class RowFormat implements Serializable {
    final List<LogicalType> types;
    final transient RowData.FieldGetter[] getters;

    RowFormat(List<LogicalType> types) {
        this.types = types;
        getters = new RowData.FieldGetter[types.size()];
        for (int i = 0; i < getters.length; i++) getters[i] = RowData.createFieldGetter(types.get(i), i);
    }

    static String esc(String s) {
        StringBuilder b = new StringBuilder(s.length() + 4);
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\') b.append("\\\\");
            else if (c == '|') b.append("\\p");
            else if (c == '\n') b.append("\\n");
            else b.append(c);
        }
        return b.toString();
    }

    String format(RowData row) {
        StringBuilder b = new StringBuilder(64);
        b.append(row.getRowKind().shortString());
        for (int i = 0; i < getters.length; i++) {
            b.append('|');
            Object v = getters[i].getFieldOrNull(row);
            if (v == null) {
                b.append("\\N");
                continue;
            }
            LogicalType t = types.get(i);
            switch (t.getTypeRoot()) {
                case BOOLEAN: b.append(((Boolean) v) ? "TRUE" : "FALSE"); break;
                case TINYINT: case SMALLINT: case INTEGER: case BIGINT: b.append(v.toString()); break;
                case FLOAT: b.append(Long.toHexString(Double.doubleToRawLongBits((Float) v))); break;
                case DOUBLE: b.append(Long.toHexString(Double.doubleToRawLongBits((Double) v))); break;
                case DECIMAL: b.append(((DecimalData) v).toBigDecimal().toPlainString()); break;
                case TIMESTAMP_WITHOUT_TIME_ZONE: {
                    int p = ((TimestampType) t).getPrecision();
                    LocalDateTime d = ((TimestampData) v).toLocalDateTime();
                    b.append(String.format("%04d-%02d-%02d %02d:%02d:%02d", d.getYear(), d.getMonthValue(),
                            d.getDayOfMonth(), d.getHour(), d.getMinute(), d.getSecond()));
                    if (p > 0) {
                        String ns = String.format("%09d", d.getNano());
                        b.append('.').append(ns, 0, Math.min(p, 9));
                    }
                    break;
                }
                case CHAR: case VARCHAR: b.append(esc(v.toString())); break;
                default: b.append(esc(v.toString()));
            }
        }
        return b.toString();
    }
}
