package sluice.nexmark;

import java.io.Serializable;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The Nexmark event function of sluice (src/connectors/nexmark.c), ported
 * line by line so that both engines see the same events bit for bit: event
 * number n is a pure function of (seed, n), drawn from a splitmix64 stream;
 * prices use an integer table built with IEEE basic operations only.  The run.sh
 * harness compares the checksums of the first N events of both.
 */
public final class NexmarkGenerator {
    static final long GAMMA = 0x9e3779b97f4a7c15L;
    static final long K_EVENT = 0xd1b54a32d192ed03L;
    static final long K_TABLE = 0xaef17502108ef2d9L;
    static final int TOTAL = 50, PERSON_PROP = 1, AUCTION_PROP = 3;
    static final long FIRST_PERSON_ID = 1000, FIRST_AUCTION_ID = 1000, FIRST_CATEGORY_ID = 10;
    static final int NUM_CATEGORIES = 5, PERSON_ID_LEAD = 10, AUCTION_ID_LEAD = 10;
    static final int HOT_SELLER_RATIO = 100, HOT_AUCTION_RATIO = 100, HOT_BIDDER_RATIO = 100;
    static final int HOT_CHANNELS_RATIO = 2, CHANNELS = 10000;
    static final double LN10 = 2.302585092994046;

    static final String[] FIRST_NAMES = {"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah",
                                         "Deiter", "Walter"};
    static final String[] LAST_NAMES = {"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones",
                                        "Noris"};
    static final String[] CITIES = {"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond",
                                    "Seattle", "Kent", "Cheyenne"};
    static final String[] STATES = {"AZ", "CA", "ID", "OR", "WA", "WY"};
    static final String[] HOT_CHANNELS = {"Google", "Facebook", "Baidu", "Apple"};
    static final double[] POW10_INT = {1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0, 1000000.0};

    /** The options that shape the events (sl_nexmark_opts_t minus the emission ones). */
    public static final class Config implements Serializable {
        public long seed = 42;
        public long baseTimeMs = 1767225600000L;
        public double interEventDelayUs = 0.1;
        public int numActivePeople = 1000, numInFlightAuctions = 100;
        public int hotAuctionRatio = 2, hotSellersRatio = 4, hotBiddersRatio = 4;
        public boolean stampEmitNs;

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Config)) return false;
            Config c = (Config) o;
            return seed == c.seed && baseTimeMs == c.baseTimeMs && interEventDelayUs == c.interEventDelayUs
                    && numActivePeople == c.numActivePeople && numInFlightAuctions == c.numInFlightAuctions
                    && hotAuctionRatio == c.hotAuctionRatio && hotSellersRatio == c.hotSellersRatio
                    && hotBiddersRatio == c.hotBiddersRatio && stampEmitNs == c.stampEmitNs;
        }

        @Override
        public int hashCode() {
            return Objects.hash(seed, baseTimeMs, interEventDelayUs, numActivePeople, numInFlightAuctions,
                    hotAuctionRatio, hotSellersRatio, hotBiddersRatio, stampEmitNs);
        }
    }

    private static final ConcurrentHashMap<Config, NexmarkGenerator> CACHE = new ConcurrentHashMap<>();

    /** One generator per configuration and JVM (its tables are immutable). */
    public static NexmarkGenerator of(Config c) {
        return CACHE.computeIfAbsent(c, NexmarkGenerator::new);
    }

    final Config c;
    final long[] priceTable = new long[4097];
    final String[] hotUrl = new String[4];
    final String[] channel = new String[CHANNELS];
    final String[] channelUrl = new String[CHANNELS];
    final long eventsForAuctions;

    public NexmarkGenerator(Config c) {
        this.c = c;
        for (int j = 0; j <= 4096; j++) {
            int d = (6 * j) >> 12;
            double t = (double) ((6 * j) & 4095) / 4096.0 * LN10, e = 1.0;
            for (int k = 30; k >= 1; k--) e = 1.0 + e * t / (double) k;
            priceTable[j] = (long) (100.0 * POW10_INT[d] * e + 0.5);
        }
        eventsForAuctions = ((long) c.numInFlightAuctions * TOTAL) / AUCTION_PROP;
        for (int i = 0; i < 4; i++) hotUrl[i] = baseUrl(tableRng(i));
        for (int ch = 0; ch < CHANNELS; ch++) {
            channel[ch] = "channel-" + ch;
            Rng r = tableRng(16 + ch);
            String u = baseUrl(r);
            if (r.below(10) > 0) u = u + "&channel_id=" + Math.abs(Integer.reverse(ch));
            channelUrl[ch] = u;
        }
    }

    // ---- random draws ----------------------------------------------------

    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    static final class Rng {
        long s;

        Rng(long s) { this.s = s; }

        long next() {
            s += GAMMA;
            return mix(s);
        }

        /** [0, b) for 0 < b < 2^32. */
        long below(long b) { return ((next() >>> 32) * b) >>> 32; }
    }

    private Rng tableRng(long id) { return new Rng(mix(c.seed ^ ((id + 1) * K_TABLE))); }

    private static String string(Rng r, int maxLen, char special) {
        int len = 3 + (int) r.below(maxLen - 3);
        char[] b = new char[len];
        for (int i = 0; i < len; i += 4) {
            long d = r.next();
            for (int k = 0; k < 4 && i + k < len; k++) {
                int t = (int) ((((d >>> (16 * k)) & 0xffff) * 338) >>> 16);
                b[i + k] = t < 26 ? special : (char) ('a' + t % 26);
            }
        }
        int a = 0, e = len;
        while (a < e && b[a] == ' ') a++;
        while (e > a && b[e - 1] == ' ') e--;
        return new String(b, a, e - a);
    }

    private static String baseUrl(Rng r) {
        StringBuilder sb = new StringBuilder(80).append("https://www.nexmark.com/");
        for (int i = 0; i < 3; i++) sb.append(string(r, 5, '_')).append('/');
        return sb.append("item.htm?query=1").toString();
    }

    private long price(Rng r) {
        long d = r.next();
        int j = (int) (d >>> 52);
        long f = (d >>> 20) & 0xffffffffL;
        return priceTable[j] + (((priceTable[j + 1] - priceTable[j]) * f) >> 32);
    }

    // ---- ids --------------------------------------------------------------

    static long lastBase0Person(long n) {
        long epoch = n / TOTAL, off = n % TOTAL;
        if (off >= PERSON_PROP) off = PERSON_PROP - 1;
        return epoch * PERSON_PROP + off;
    }

    static long lastBase0Auction(long n) {
        long epoch = n / TOTAL, off = n % TOTAL;
        if (off < PERSON_PROP) {
            epoch--;
            off = AUCTION_PROP - 1;
        } else if (off >= PERSON_PROP + AUCTION_PROP) {
            off = AUCTION_PROP - 1;
        } else {
            off -= PERSON_PROP;
        }
        return epoch * AUCTION_PROP + off;
    }

    private long nextBase0Person(long n, Rng r) {
        long numPeople = lastBase0Person(n) + 1;
        long active = Math.min(numPeople, c.numActivePeople);
        return numPeople - active + r.below(active + PERSON_ID_LEAD);
    }

    private long nextBase0Auction(long n, Rng r) {
        long max = lastBase0Auction(n);
        long min = Math.max(max - c.numInFlightAuctions, 0);
        return min + r.below(max - min + 1 + AUCTION_ID_LEAD);
    }

    public long dateTime(long n) { return c.baseTimeMs + (long) ((double) n * c.interEventDelayUs) / 1000; }

    // ---- events -----------------------------------------------------------

    /** Event number n into e (every field of e is set). */
    public void event(long n, Event e) {
        Rng r = new Rng(mix(c.seed ^ (n * K_EVENT)));
        e.dateTime = dateTime(n);
        e.emitNs = Event.NO_EMIT;
        long rem = n % TOTAL;
        if (rem < PERSON_PROP) {
            e.type = Event.PERSON;
            e.personId = lastBase0Person(n) + FIRST_PERSON_ID;
            e.personName = FIRST_NAMES[(int) r.below(FIRST_NAMES.length)] + " "
                    + LAST_NAMES[(int) r.below(LAST_NAMES.length)];
            e.personEmail = string(r, 7, ' ') + "@" + string(r, 5, ' ') + ".com";
            StringBuilder cc = new StringBuilder(19);
            for (int i = 0; i < 4; i++) {
                int d = (int) r.below(10000);
                if (i > 0) cc.append(' ');
                cc.append((char) ('0' + d / 1000)).append((char) ('0' + d / 100 % 10))
                        .append((char) ('0' + d / 10 % 10)).append((char) ('0' + d % 10));
            }
            e.personCreditCard = cc.toString();
            e.personCity = CITIES[(int) r.below(CITIES.length)];
            e.personState = STATES[(int) r.below(STATES.length)];
        } else if (rem < PERSON_PROP + AUCTION_PROP) {
            e.type = Event.AUCTION;
            e.auctionId = lastBase0Auction(n) + FIRST_AUCTION_ID;
            long seller;
            if (r.below(c.hotSellersRatio) > 0) seller = (lastBase0Person(n) / HOT_SELLER_RATIO) * HOT_SELLER_RATIO;
            else seller = nextBase0Person(n, r);
            e.seller = seller + FIRST_PERSON_ID;
            e.category = FIRST_CATEGORY_ID + r.below(NUM_CATEGORIES);
            e.initialBid = price(r);
            long horizon = dateTime(n + eventsForAuctions) - e.dateTime;
            long span = Math.max(horizon * 2, 1);
            if (span > 0xffffffffL) span = 0xffffffffL;
            e.expires = e.dateTime + 1 + r.below(span);
            e.itemName = string(r, 20, ' ');
            e.description = string(r, 100, ' ');
            e.reserve = e.initialBid + price(r);
        } else {
            e.type = Event.BID;
            long auction;
            if (r.below(c.hotAuctionRatio) > 0) auction = (lastBase0Auction(n) / HOT_AUCTION_RATIO) * HOT_AUCTION_RATIO;
            else auction = nextBase0Auction(n, r);
            e.bidAuction = auction + FIRST_AUCTION_ID;
            long bidder;
            if (r.below(c.hotBiddersRatio) > 0) bidder = (lastBase0Person(n) / HOT_BIDDER_RATIO) * HOT_BIDDER_RATIO + 1;
            else bidder = nextBase0Person(n, r);
            e.bidder = bidder + FIRST_PERSON_ID;
            e.price = price(r);
            if (r.below(HOT_CHANNELS_RATIO) > 0) {
                int i = (int) r.below(4);
                e.channel = HOT_CHANNELS[i];
                e.url = hotUrl[i];
            } else {
                int ch = (int) r.below(CHANNELS);
                e.channel = channel[ch];
                e.url = channelUrl[ch];
            }
        }
    }

    // ---- hashes (sluice/nexmark.h) ------------------------------------------

    public static long fold(long h, long v) { return mix(h ^ v) * GAMMA; }

    /** Field k of a result row in the result checksum: a row's hash is the sum of its fields'
     * (independent, so a CPU computes them side by side), as in examples/nexmark/common.c. */
    public static long field(int k, long v) { return mix(v ^ ((k + 1) * GAMMA)); }

    /** The text hash of sluice: 8-byte little-endian words (ASCII text). */
    public static long text(String s) {
        int len = s.length();
        long h = GAMMA ^ len;
        int i = 0;
        for (; i + 8 <= len; i += 8) {
            long w = 0;
            for (int k = 0; k < 8; k++) w |= ((long) (s.charAt(i + k) & 0xff)) << (8 * k);
            h = (h ^ w) * 0xff51afd7ed558ccdL;
        }
        if (i < len) {
            long w = 0;
            for (int k = 0; i + k < len; k++) w |= ((long) (s.charAt(i + k) & 0xff)) << (8 * k);
            h = (h ^ w) * 0xff51afd7ed558ccdL;
        }
        return mix(h);
    }

    public static long hash(Event e) {
        long h = fold(fold(0, e.type), e.dateTime);
        switch (e.type) {
            case Event.PERSON:
                h = fold(h, e.personId);
                h = fold(h, text(e.personName));
                h = fold(h, text(e.personEmail));
                h = fold(h, text(e.personCreditCard));
                h = fold(h, text(e.personCity));
                return fold(h, text(e.personState));
            case Event.AUCTION:
                h = fold(h, e.auctionId);
                h = fold(h, text(e.itemName));
                h = fold(h, text(e.description));
                h = fold(h, e.initialBid);
                h = fold(h, e.reserve);
                h = fold(h, e.expires);
                h = fold(h, e.seller);
                return fold(h, e.category);
            default:
                h = fold(h, e.bidAuction);
                h = fold(h, e.bidder);
                h = fold(h, e.price);
                h = fold(h, text(e.channel));
                return fold(h, text(e.url));
        }
    }
}
