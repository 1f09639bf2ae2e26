"""The highlights' pure core: schedule, rules, excerpts, privacy, ranking, stats, rendering."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.config import ConfigError, load_settings
from bot.config_sections import highlights_config
from bot.highlights.config import HighlightsConfig
from bot.highlights.digest import build_digest, ranked
from bot.highlights.excerpt import excerpt, plain
from bot.highlights.models import ChannelInfo, Highlight, Names, Visibility
from bot.highlights.privacy import recordable, shown
from bot.highlights.rules import base_emoji, emoji_list, is_tracked
from bot.highlights.schedule import DigestSchedule, Week
from bot.highlights.stats import build_stats
from bot.render.charts import MAX_BYTES, highlights_chart
from bot.render.highlights import neutral, render_digest, render_stats, render_week
from bot.shell.emulator import validate_blocks

BERLIN = DigestSchedule.parse("fri 16:00 Europe/Berlin")


def hl(channel: str, ts: float, reactors: int, author: str = "U1", **kw: Any) -> Highlight:
    return Highlight(
        team="T1",
        channel=channel,
        ts=f"{ts:.6f}",
        author=author,
        reactors=frozenset(f"UR{i}" for i in range(reactors)),
        first_tagged_at=datetime.fromtimestamp(ts, UTC),
        excerpt=kw.pop("excerpt", "nice work"),
        permalink=kw.pop("permalink", f"https://x.slack.com/archives/{channel}/p{int(ts)}"),
        **kw,
    )


# schedule -------------------------------------------------------------------------------------


def test_schedule_parses_the_design_form_and_refuses_nonsense() -> None:
    assert DigestSchedule(4, 16, 0, "Europe/Berlin") == BERLIN
    assert DigestSchedule.parse("Monday 9:30") == DigestSchedule(0, 9, 30, "UTC")
    for bad in ("fri", "fri 25:00", "xyz 10:00", "fri 16:00 Mars/Olympus", ""):
        with pytest.raises(ValueError):
            DigestSchedule.parse(bad)


def test_fire_times_follow_local_time_through_daylight_saving() -> None:
    # Berlin leaves summer time on Sunday 25 Oct 2026: Friday 16:00 is 14:00 UTC before it,
    # 15:00 UTC after.
    before = BERLIN.last_fire(datetime(2026, 10, 24, tzinfo=UTC))
    after = BERLIN.next_fire(before)
    assert before == datetime(2026, 10, 23, 14, 0, tzinfo=UTC)
    assert after == datetime(2026, 10, 30, 15, 0, tzinfo=UTC)
    week = BERLIN.week_ending(after)
    assert (week.start, week.end, week.id) == (before, after, "2026-10-30")
    at_fire = datetime(2026, 10, 30, 15, 0, tzinfo=UTC)
    assert BERLIN.last_fire(at_fire) == at_fire  # at or before
    assert BERLIN.current_week(at_fire).start == at_fire
    assert BERLIN.last_week(at_fire).end == at_fire


# rules and excerpts ------------------------------------------------------------------------------


def test_skin_tones_fold_and_lists_parse() -> None:
    assert base_emoji("meow_party::skin-tone-3") == "meow_party"
    assert base_emoji(":Meow_Party:") == "meow_party"
    assert emoji_list(" meow_party, :tada:,, meow_party ") == ("meow_party", "tada")
    assert is_tracked("tada::skin-tone-2", ("meow_party", "tada"))
    assert not is_tracked("thumbsup", ("meow_party",))


def test_excerpt_neutralises_mentions_links_and_broadcasts() -> None:
    text = (
        "<!here> <@U1> fixed it &amp; <@U2|bo> helped in <#C9|gpu-ops> "
        "<!subteam^S1|@oncall> see <https://wiki.example.org/x|the wiki> or <https://a.io/b>"
    )
    body = plain(text, {"U1": "Ana"}.get)
    assert body == ("@here @Ana fixed it & @bo helped in #gpu-ops @oncall see the wiki or a.io/b")
    safe = neutral(body)
    assert "<" not in safe and "@here" not in safe and "a.io" not in safe
    assert "&amp;" in safe
    long = "word " * 100
    cut = excerpt(long, 200)
    assert len(cut) <= 200 and cut.endswith("…") and not cut.endswith(" …")
    assert excerpt("short", 200) == "short"


# privacy ---------------------------------------------------------------------------------------


def info(cid: str, vis: Visibility, **kw: Any) -> ChannelInfo:
    return ChannelInfo(id=cid, name=cid.lower(), visibility=vis, **kw)


def test_privacy_rules() -> None:
    cfg = HighlightsConfig(private_opt_in=frozenset({"CPRIV"}), excluded_channels={"CEXCL"})
    pub, priv = hl("CPUB", 1e9, 1), hl("CPRIV", 1e9, 1)
    other_priv = hl("CPRIV2", 1e9, 1)
    assert shown(pub, info("CPUB", Visibility.PUBLIC), "CDIGEST", cfg, set())
    # Private: only in itself, and only when it opted in.
    assert not shown(priv, info("CPRIV", Visibility.PRIVATE), "CDIGEST", cfg, set())
    assert shown(priv, info("CPRIV", Visibility.PRIVATE), "CPRIV", cfg, set())
    assert not shown(other_priv, info("CPRIV2", Visibility.PRIVATE), "CPRIV2", cfg, set())
    assert not shown(other_priv, info("CPRIV2", Visibility.PRIVATE), "CPRIV", cfg, set())
    for vis in (Visibility.IM, Visibility.MPIM):
        h = hl("G1", 1e9, 1)
        assert not shown(h, info("G1", vis), "G1", cfg, set())
        assert not recordable(info("G1", vis))
    assert not shown(pub, None, "CDIGEST", cfg, set())  # unreadable: fail closed
    assert not shown(hl("CEXCL", 1e9, 1), info("CEXCL", Visibility.PUBLIC), "C", cfg, set())
    assert not shown(pub, info("CPUB", Visibility.PUBLIC), "C", cfg, {"U1"})  # opted out
    archived = info("CPUB", Visibility.PUBLIC, archived=True)
    assert not shown(pub, archived, "C", cfg, set())
    assert shown(pub, archived, "C", cfg, set(), listing=False)  # stats still count it
    assert not shown(pub, info("CPUB", Visibility.PUBLIC, member=False), "C", cfg, set())


# digest and stats ------------------------------------------------------------------------------


WEEK = Week(datetime(2026, 11, 27, 16, tzinfo=UTC), datetime(2026, 12, 4, 16, tzinfo=UTC), "x")


def test_ranked_by_distinct_reactors_then_time_and_grouped_by_channel() -> None:
    t = WEEK.start.timestamp()
    hs = [hl("CA", t + 50, 2), hl("CB", t + 10, 5), hl("CA", t + 20, 2), hl("CB", t + 5, 1)]
    assert [h.ts for h in ranked(hs)] == [hs[1].ts, hs[2].ts, hs[0].ts, hs[3].ts]
    d = build_digest(hs, WEEK, "CD", top_n=3)
    assert d.total == 4 and d.channels == 2 and d.reactions == 10 and d.people == 5
    assert [g.channel for g in d.top] == ["CB", "CA"]
    assert [len(g.entries) for g in d.top] == [1, 2] and d.rest_count == 1


def test_stats_totals_weeks_and_tops() -> None:
    sched = DigestSchedule.parse("fri 16:00 UTC")
    start = datetime(2020, 6, 1, tzinfo=UTC)
    hs = [
        hl(
            "CA" if i % 3 else "CB",
            (start + timedelta(days=i * 2)).timestamp(),
            1,
            author=f"U{i % 4}",
        )
        for i in range(100)
    ]
    now = start + timedelta(days=210)
    s = build_stats(hs, now, sched)
    assert s.total == 100 and s.first_at == start
    assert sum(n for _, n in s.weeks) == 100
    assert all(b[0] - a[0] == timedelta(days=7) for a, b in zip(s.weeks, s.weeks[1:], strict=False))
    assert s.weeks[-1][0] == sched.next_fire(now)
    assert s.per_week == pytest.approx(100 / 30)
    assert s.top_channels[0] == ("CA", 66) and len(s.top_authors) == 4
    assert build_stats([], now, sched).total == 0


# rendering -------------------------------------------------------------------------------------


def test_digest_renders_within_limits_with_the_rest_in_the_thread() -> None:
    t = WEEK.start.timestamp()
    evil = "<!channel> <@U9> http://evil.example.com *bold* " + "x" * 300
    hs = [hl("CA", t + i, 30 - i, excerpt=evil if i == 0 else f"post {i}") for i in range(25)]
    names = Names(people={"U1": "<@U7> Ana"}, channels={"CA": "general"})
    main, replies = render_digest(
        build_digest(hs, WEEK, "CD", top_n=15), names, emoji="meow_party", zone=BERLIN.zone
    )
    assert validate_blocks(main.blocks) == []
    text = json.dumps(main.blocks)
    assert "<!channel>" not in text and "<@U9>" not in text and "<@U7>" not in text
    assert "evil.example.com" not in text and "http://" not in text
    assert "and 10 more" in text and "25 highlights" in text
    assert "Fri 27 Nov 2026" in text
    assert replies and all(validate_blocks(r.blocks) == [] for r in replies)
    assert sum(json.dumps(r.blocks).count(":meow_party:") for r in replies) == 10


def test_empty_week_and_week_list_and_stats_render() -> None:
    empty = build_digest([], WEEK, "CD", top_n=15)
    main, replies = render_digest(empty, Names(), emoji="meow_party", zone=BERLIN.zone)
    assert "quiet week" in json.dumps(main.blocks) and replies == []
    t = WEEK.start.timestamp()
    week = render_week(
        build_digest([hl("CA", t, 2)], WEEK, "CD", 15),
        Names(),
        emoji="meow_party",
        zone=BERLIN.zone,
        title="This week so far",
    )
    assert validate_blocks(week.blocks) == [] and "nice work" in json.dumps(week.blocks)
    hs = [hl("CA", t - i * 86400 * 3, 1) for i in range(120)]
    stats = build_stats(hs, WEEK.end, BERLIN)
    msg = render_stats(stats, Names(people={"U1": "Ana"}), emoji="meow_party", zone=BERLIN.zone)
    text = json.dumps(msg.blocks)
    assert validate_blocks(msg.blocks) == [] and "120" in text and "a week" in text
    png = highlights_chart(stats.weeks, title="Highlights per week")
    assert png.startswith(b"\x89PNG") and len(png) < MAX_BYTES
    assert highlights_chart((), title="none").startswith(b"\x89PNG")


# configuration ---------------------------------------------------------------------------------


def test_settings_names_and_one_sentence_errors(tmp_path: Any) -> None:
    s = load_settings(
        MEOWBOT_DIGEST_SCHEDULE="fri 16:00 Europe/Berlin",
        MEOWBOT_HIGHLIGHT_EMOJI="meow_party, tada",
        MEOWBOT_DIGEST_CHANNEL="C0HL",
    )
    cfg = highlights_config(s)
    assert cfg.emoji == ("meow_party", "tada") and cfg.schedule == BERLIN
    assert cfg.digest_channel == "C0HL" and cfg.threshold == 1 and cfg.top_n == 15
    with pytest.raises(ConfigError, match="MEOWBOT_DIGEST_SCHEDULE must be a weekday"):
        load_settings(MEOWBOT_DIGEST_SCHEDULE="someday")
    with pytest.raises(ConfigError, match="MEOWBOT_HIGHLIGHT_EMOJI"):
        load_settings(MEOWBOT_HIGHLIGHT_EMOJI="<!here>")
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("highlights:\n  threshold: 0\n")
    with pytest.raises(ConfigError, match=r"highlights\.threshold"):
        highlights_config(load_settings(MEOWBOT_CONFIG=str(cfg_file)))
    cfg_file.write_text("highlights:\n  threshold: 2\n  private_opt_in: [C0TEAM]\n")
    cfg = highlights_config(load_settings(MEOWBOT_CONFIG=str(cfg_file)))
    assert cfg.threshold == 2 and cfg.digest_targets() == ["C0TEAM"]


def test_the_chart_draws_each_week_on_its_own_days_and_this_week_so_far(tmp_path: Any) -> None:
    from bot.render import charts

    now = datetime(2026, 12, 9, 10, tzinfo=UTC)  # a Wednesday, in the week ending 11 Dec
    on_1_dec = datetime(2026, 12, 1, 12, tzinfo=UTC).timestamp()
    hs = [hl("CA", on_1_dec + i, 1) for i in range(9)]
    hs += [hl("CA", datetime(2026, 12, 7, 12, tzinfo=UTC).timestamp() + i, 1) for i in range(3)]
    stats = build_stats(hs, now, DigestSchedule.parse("fri 16:00 UTC"))
    fig = charts._highlights_figure(stats.weeks, title="Highlights per week", now=now)
    bars = [(p.get_x(), p.get_x() + p.get_width(), p.get_height()) for p in fig.axes[0].patches]
    nine = next(b for b in bars if b[2] == 9)
    # The 9 highlights of 1 Dec stand over 1 Dec, not five days to its right.
    assert nine[0] < on_1_dec < nine[1]
    assert nine[0] >= datetime(2026, 11, 27, 16, tzinfo=UTC).timestamp()
    so_far = bars[-1]
    assert so_far[2] == 3 and so_far[1] <= now.timestamp()  # nothing drawn in the future
    legend = fig.axes[0].get_legend()
    assert legend is not None
    assert "this week so far (3)" in [t.get_text() for t in legend.get_texts()]
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks[-2:] == ["27 Nov\n2026", "04 Dec\n2026"]  # weeks named by their first day
    png = charts.highlights_chart(stats.weeks, title="Highlights per week", now=now)
    (tmp_path / "highlights.png").write_bytes(png)  # looked at by hand while writing this
    assert png.startswith(b"\x89PNG") and len(png) < MAX_BYTES
    msg = render_stats(stats, Names(), emoji="meow_party", zone=ZoneInfo("UTC"), now=now)
    text = json.dumps(msg.blocks)
    assert "04 Dec to 11 Dec: 3 so far" in text and "27 Nov to 04 Dec: 9" in text
