"""Kubernetes CEL value libraries: URLs, quantities, IPs and CIDRs (``k8s.io/apiserver/pkg/cel/library``).

The interpreter cannot carry Python objects, so such a value travels through a rule as a one-key
map tagged with its kind (``{"@quantity": "15e-1"}``); each function here checks the tag (else "no
such overload", as cel-go answers for a wrong type) and re-reads the value. Quantities are parsed
by the shared ``genericapi.apimachinery.quantity`` (the same parser the API uses), so errors and
results match kube's ``resource.Quantity``.

The tag holds a canonical text, so CEL's ``==`` (map equality) agrees with kube's ``Equal`` on these
types: a quantity is its exact value (``quantity('1') == quantity('1000m')``, ``quantity('1Ki') ==
quantity('1024')``), an IP its address (``ip('::1') == ip('0:0::1')``), a CIDR its address and
prefix length without masking (as ``netip.Prefix`` compares), a URL its text with the scheme
lower-cased. Ordering operators (``<``) on these maps fail with "no such overload", as kube has none
for them (it refuses them when the CRD is written); ``compareTo``/``isGreaterThan`` compare values.
Known difference: Go keeps a quantity's internal scale, so ``quantity('1000m').isInteger()`` is
false in kube; here the canonical value ``1`` makes it true (and ``asInteger()`` gives 1).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from genericapi.apimachinery.quantity import Quantity, parse_quantity


class ExtError(ValueError):
    """A function failed; the text is the runtime error cel-go reports."""


def _tagged(v: Any, tag: str, name: str) -> str:
    if isinstance(v, dict) and len(v) == 1 and isinstance(v.get(tag), str):
        return str(v[tag])
    raise ExtError(f"no such overload: {name}")


def _string(v: Any, name: str) -> str:
    if not isinstance(v, str):
        raise ExtError(f"no such overload: {name}")
    return v


# -- quantity ---------------------------------------------------------------------------------------------------------
def canonical_quantity(q: Quantity) -> str:
    """One text per value (``<digits>e<exponent>``, trailing zeros folded into the exponent): the tag's content."""
    value = q.value
    if not value:
        return "0"
    sign, digits, exponent = value.normalize().as_tuple()
    return f"{'-' if sign else ''}{''.join(map(str, digits))}e{exponent}"


def _tag_quantity(q: Quantity) -> dict[str, str]:
    return {"@quantity": canonical_quantity(q)}


def quantity(s: Any) -> dict[str, str]:
    text = _string(s, "quantity")
    try:
        parsed = parse_quantity(text)
    except ValueError as e:
        raise ExtError(str(e)) from None
    return _tag_quantity(parsed)


def is_quantity(s: Any) -> bool:
    try:
        parse_quantity(_string(s, "isQuantity"))
    except ValueError:
        return False
    return True


def _q(v: Any, name: str) -> Quantity:
    return parse_quantity(_tagged(v, "@quantity", name))


def _q_or_int(v: Any, name: str) -> Quantity:
    if isinstance(v, int) and not isinstance(v, bool):
        return Quantity.from_int(v)
    return _q(v, name)


def q_sign(v: Any) -> int:
    return _q(v, "sign").sign()


def q_is_integer(v: Any) -> bool:
    return _q(v, "isInteger").is_integer()


def q_as_integer(v: Any) -> int:
    value = _q(v, "asInteger").as_int64()
    if value is None:
        raise ExtError("cannot convert value to integer")
    return value


def q_as_float(v: Any) -> float:
    return _q(v, "asApproximateFloat").as_approximate_float()


def q_add(a: Any, b: Any) -> dict[str, str]:
    return _tag_quantity(_q(a, "add").add(_q_or_int(b, "add")))


def q_sub(a: Any, b: Any) -> dict[str, str]:
    return _tag_quantity(_q(a, "sub").sub(_q_or_int(b, "sub")))


def q_compare(a: Any, b: Any) -> int:
    return _q(a, "compareTo").cmp(_q(b, "compareTo"))


def q_greater(a: Any, b: Any) -> bool:
    return _q(a, "isGreaterThan").cmp(_q(b, "isGreaterThan")) > 0


def q_less(a: Any, b: Any) -> bool:
    return _q(a, "isLessThan").cmp(_q(b, "isLessThan")) < 0


# -- url (Go's url.ParseRequestURI) --------------------------------------------------------------------------------
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*$")


def _parse_url(text: str) -> str | None:
    """Why ``text`` is not a request URI, or None when it is."""
    if not text:
        return "empty url"
    if text.startswith("/"):
        return None
    scheme, sep, _ = text.partition(":")
    if not sep or not _SCHEME.match(scheme):
        return "invalid URI for request"
    parts = urlsplit(text, allow_fragments=False)
    try:
        _ = parts.port
    except ValueError:
        return f'invalid port "{parts.netloc.rpartition(":")[2]}" after host'
    return None


def url(s: Any) -> dict[str, str]:
    text = _string(s, "url")
    why = _parse_url(text)
    if why is not None:
        raise ExtError(f'URL parse error during conversion from string: parse "{text}": {why}')
    scheme, sep, rest = text.partition(":")
    # Go's url.Parse lower-cases the scheme, and kube compares URLs by their re-serialised text.
    return {"@url": f"{scheme.lower()}:{rest}" if sep and not text.startswith("/") else text}


def is_url(s: Any) -> bool:
    return _parse_url(_string(s, "isURL")) is None


def _url(v: Any, name: str) -> Any:
    return urlsplit(_tagged(v, "@url", name), allow_fragments=False)


def get_scheme(v: Any) -> str:
    return str(_url(v, "getScheme").scheme)


def get_host(v: Any) -> str:
    return str(_url(v, "getHost").netloc.rpartition("@")[2])


def get_hostname(v: Any) -> str:
    host = get_host(v)
    if host.startswith("["):
        return host[1:host.find("]")]
    return host.rpartition(":")[0] if ":" in host else host


def get_port(v: Any) -> str:
    host = get_host(v)
    tail = host[host.find("]") + 1:] if host.startswith("[") else host
    return tail.rpartition(":")[2] if ":" in tail else ""


def get_escaped_path(v: Any) -> str:
    return quote(_url(v, "getEscapedPath").path, safe="/:@!$&'()*+,;=-._~%")


def get_query(v: Any) -> dict[str, list[str]]:
    return {k: list(vs) for k, vs in parse_qs(_url(v, "getQuery").query, keep_blank_values=True).items()}


# -- ip / cidr (kube 1.31+) ------------------------------------------------------------------------------------------
def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | str:
    if "%" in text:
        return "IP address with zone value is not allowed"
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return f'IP Address "{text}" parse error during conversion from string: ParseAddr("{text}"): unable to parse IP'
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return "IPv4-mapped IPv6 address is not allowed"
    return addr


def ip(s: Any) -> dict[str, str]:
    if isinstance(s, dict) and "@cidr" in s:  # cidr('10.0.0.0/8').ip()
        return {"@ip": str(ipaddress.ip_interface(_tagged(s, "@cidr", "ip")).ip)}
    addr = _parse_ip(_string(s, "ip"))
    if isinstance(addr, str):
        raise ExtError(addr)
    return {"@ip": str(addr)}


def is_ip(s: Any) -> bool:
    return not isinstance(_parse_ip(_string(s, "isIP")), str)


def _ip(v: Any, name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(_tagged(v, "@ip", name))


def _cidr(v: Any, name: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    return ipaddress.ip_interface(_tagged(v, "@cidr", name))


def cidr(s: Any) -> dict[str, str]:
    text = _string(s, "cidr")
    addr, sep, _ = text.partition("/")
    parsed = _parse_ip(addr) if sep else "missing prefix"
    try:
        ipaddress.ip_interface(text) if not isinstance(parsed, str) else None
    except ValueError:
        parsed = "invalid prefix"
    if isinstance(parsed, str):
        raise ExtError(f'network address parse error during conversion from string: netip.ParsePrefix("{text}"): '
                       f"{parsed}")
    return {"@cidr": str(ipaddress.ip_interface(text))}  # canonical address text, host bits kept


def is_cidr(s: Any) -> bool:
    try:
        cidr(s)
    except ExtError:
        return False
    return True


def family(v: Any) -> int:
    return _ip(v, "family").version


def contains_ip(c: Any, other: Any) -> bool:
    net = _cidr(c, "containsIP").network
    addr = ipaddress.ip_address(other) if isinstance(other, str) else _ip(other, "containsIP")
    return addr.version == net.version and addr in net


def contains_cidr(c: Any, other: Any) -> bool:
    net = _cidr(c, "containsCIDR").network
    sub = ipaddress.ip_interface(other).network if isinstance(other, str) else _cidr(other, "containsCIDR").network
    return sub.version == net.version and sub.subnet_of(net)  # type: ignore[arg-type]


def prefix_length(c: Any) -> int:
    return _cidr(c, "prefixLength").network.prefixlen


def masked(c: Any) -> dict[str, str]:
    return {"@cidr": str(_cidr(c, "masked").network)}


def _ip_predicate(name: str, attr: str) -> Callable[[Any], bool]:
    def check(v: Any) -> bool:
        addr = _ip(v, name)
        if attr == "is_global_unicast":
            return not (addr.is_multicast or addr.is_unspecified or addr.is_loopback or addr.is_link_local
                        or addr == ipaddress.ip_address("255.255.255.255"))
        if attr == "is_link_local_multicast":
            return addr.is_multicast and (addr in ipaddress.ip_network("224.0.0.0/24") if addr.version == 4
                                          else addr in ipaddress.ip_network("ff02::/16"))
        return bool(getattr(addr, attr))
    return check


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": quantity,
    "isQuantity": is_quantity,
    "sign": q_sign,
    "isInteger": q_is_integer,
    "asInteger": q_as_integer,
    "asApproximateFloat": q_as_float,
    "add": q_add,
    "sub": q_sub,
    "compareTo": q_compare,
    "isGreaterThan": q_greater,
    "isLessThan": q_less,
    "url": url,
    "isURL": is_url,
    "getScheme": get_scheme,
    "getHost": get_host,
    "getHostname": get_hostname,
    "getPort": get_port,
    "getEscapedPath": get_escaped_path,
    "getQuery": get_query,
    "ip": ip,
    "isIP": is_ip,
    "cidr": cidr,
    "isCIDR": is_cidr,
    "family": family,
    "containsIP": contains_ip,
    "containsCIDR": contains_cidr,
    "prefixLength": prefix_length,
    "masked": masked,
    "isUnspecified": _ip_predicate("isUnspecified", "is_unspecified"),
    "isLoopback": _ip_predicate("isLoopback", "is_loopback"),
    "isLinkLocalUnicast": _ip_predicate("isLinkLocalUnicast", "is_link_local"),
    "isLinkLocalMulticast": _ip_predicate("isLinkLocalMulticast", "is_link_local_multicast"),
    "isGlobalUnicast": _ip_predicate("isGlobalUnicast", "is_global_unicast"),
}
