import pytest
from sounding.settings import extras

pytestmark = pytest.mark.unit


def test_a_role_whose_modules_are_installed_needs_nothing():
    extras.require(extras.Role("a role", "base", ("json", "numpy")))


def test_a_missing_extra_is_named_with_its_install_command():
    role = extras.Role("the thing (sounding serve thing)", "thing", ("json", "no_such_module_xyz"))
    other = extras.Role("another", "other", ("also_missing_xyz",))
    with pytest.raises(extras.MissingExtra) as raised:
        extras.require(role, other)
    message = str(raised.value)
    assert "the thing (sounding serve thing) needs the [thing] extra (missing: no_such_module_xyz)" in message
    assert message.endswith("pip install 'sounding[thing,other]'")
