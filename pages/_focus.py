"""Where the keyboard and the view start on Tune: a skip link and the scroll to the top.

``SKIP_LINK``: the page's first Tab stop, a "Skip to the knobs" link (shown while it has the
focus, as a site's "skip to content" link) that moves the focus to Tune's first knob (on another
page, to its first control): one Tab and Enter instead of crossing the sidebar and every picker.
Created once, at the start of the document, by a script (Streamlit draws the sidebar before the
page, so no element of the page comes first in the Tab order).

``TO_TOP``: Tune opened from another page (Evaluate's "Open on Tune") starts at its top, the
keyboard's too; Streamlit keeps the scroll position of its scrolling containers across a page
switch.

Both are scripts (``st.html(..., unsafe_allow_javascript=True)``) made of constants only.
"""

from __future__ import annotations

SKIP_LINK = """<script>
(() => {
  if (document.getElementById('rwb-skip')) return;
  const a = document.createElement('a');
  a.id = 'rwb-skip'; a.href = '#'; a.textContent = 'Skip to the knobs';
  a.style.cssText = 'position:fixed;left:12px;top:-60px;z-index:1000100;background:#fff;color:#24292f;'
    + 'padding:6px 12px;border:2px solid #ff4b4b;border-radius:6px;font:14px sans-serif;';
  a.addEventListener('focus', () => { a.style.top = '12px'; });
  a.addEventListener('blur', () => { a.style.top = '-60px'; });
  a.addEventListener('click', (event) => {
    event.preventDefault();
    const knob = '[class*="st-key-tune_k_"]';
    const target = document.querySelector(`${knob} input, ${knob} [role="slider"], ${knob} button`)
      || document.querySelector('[data-testid="stMain"] input, [data-testid="stMain"] button');
    if (target) { target.focus(); target.scrollIntoView({block: 'center'}); }
  });
  document.body.prepend(a);
})();
</script>"""

TO_TOP = """<script>
for (const el of [document.scrollingElement, ...document.querySelectorAll(
    '[data-testid="stMain"], [data-testid="stAppScrollToBottomContainer"], [data-testid="stAppViewContainer"]')])
  if (el) el.scrollTop = 0;
// the keyboard starts at the top too: the next Tab reaches the skip link, not what follows the
// button that was pressed on the other page
document.body.setAttribute('tabindex', '-1');
document.body.focus({preventScroll: true});
document.body.removeAttribute('tabindex');
</script>"""
