package sluice.nexmark;

/**
 * One Nexmark event: the union of person, auction and bid fields, like
 * sluice's sl_nexmark_schema() row (fields of the other kinds are 0 / null).
 * A public POJO, so Flink serializes it with its PojoSerializer.
 */
public class Event {
    public static final int PERSON = 0, AUCTION = 1, BID = 2;
    public static final long NO_EMIT = Long.MIN_VALUE;

    public int type;
    public long dateTime;
    // person
    public long personId;
    public String personName, personEmail, personCreditCard, personCity, personState;
    // auction
    public long auctionId, initialBid, reserve, expires, seller, category;
    public String itemName, description;
    // bid
    public long bidAuction, bidder, price;
    public String channel, url;
    /** System.nanoTime() at emission (latency runs), else NO_EMIT. */
    public long emitNs = NO_EMIT;

    public Event() {}
}
