"""AppTest of the Profiles page: edit, diff, an invalid TOML, save, rename, delete."""

from __future__ import annotations

from tests.pages.test_app import frame_with, goto, run


def test_profiles_edit_diff_and_invalid_toml(app):
    at = goto(app, "pages/profiles.py")
    area = at.text_area(key="profiles_toml_profile:debug")
    at = run(area.set_value(area.value.replace('profile = "debug"', 'profile = {name = "debug", w_sparse = 0.5}', 1)))
    diff = frame_with(at, "parameter", "default", "this")
    assert list(diff["parameter"]) == ["adaptive.profile.w_sparse"]
    params = frame_with(at, "parameter", "value")
    assert not any(p.startswith("rrf.") for p in params["parameter"])  # only what this profile uses
    at = run(at.text_area(key="profiles_toml_profile:debug").set_value("fusion = 'nope'"))
    assert at.error


def test_profiles_save_diff_against_origin_rename_delete(app, home):
    at = goto(app, "pages/profiles.py")
    area = at.text_area(key="profiles_toml_profile:debug")
    at = run(area.set_value(area.value.replace('profile = "debug"', 'profile = {name = "debug", w_sparse = 0.5}', 1)))
    at = run(at.text_input(key="profiles_name").set_value("mine"))
    at = run(at.button(key="profiles_save").click())
    assert (home / "profiles" / "mine.toml").is_file()
    assert at.selectbox(key="profiles_pick").value == "saved:mine"
    diff = frame_with(at, "parameter", "default", "this")            # against debug, where it came from
    assert list(diff["parameter"]) == ["adaptive.profile.w_sparse"]
    at = run(at.text_input(key="profiles_name").set_value("mine"))
    at = run(at.button(key="profiles_save").click())
    assert at.button(key="profiles_overwrite_yes")                    # asks before overwriting
    at = run(at.text_input(key="profiles_rename_to").set_value("yours"))
    at = run(at.button(key="profiles_rename").click())
    assert (home / "profiles" / "yours.toml").is_file() and not (home / "profiles" / "mine.toml").exists()
    at = run(at.checkbox(key="profiles_delete_confirm").check())
    at = run(at.button(key="profiles_delete").click())
    assert not (home / "profiles" / "yours.toml").exists()
