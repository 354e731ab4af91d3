from __future__ import annotations

import asyncio

from services.interaction.settings import Settings
from tests.services.interaction.harness import ADMIN_SURFACE_TOKEN, BROKER_TOKEN, Link, Surface, accept, start_service


async def step(name, aw):
    try:
        async with asyncio.timeout(4):
            return await aw
    except TimeoutError:
        print("STUCK AT", name)
        for t in asyncio.all_tasks():
            print("TASK", t.get_name(), t.get_coro())
            for f in t.get_stack():
                print("   ", f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
        raise

async def test_debug(settings: Settings) -> None:
    for n in range(30):
        svc = await step("start", start_service(settings))
        b = svc.channel(BROKER_TOKEN); s = svc.channel(ADMIN_SURFACE_TOKEN)
        link = await step("link", Link.connect(b))
        opened = await step("open", link.open("s-a", f"inv-{n}"))
        surface = await step("attach", Surface.attach(s, ("s-a",)))
        await step("snap", surface.next("snapshot"))
        await step("answer", surface.answer("sub-1", opened.interaction_id, accept("prod")))
        await step("outcome", surface.next("answer_outcome"))
        await step("event", surface.next("event"))
        await step("settled", link.next_settled())
        await step("sclose", surface.close()); await step("lclose", link.close())
        await step("bclose", b.close()); await step("sclose", s.close())
        await step("stop", svc.running.stop())
