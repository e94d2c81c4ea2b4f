/*
 * The ladder diagram of a connect/disconnect with one lost REP, end to end:
 * Debian's rping over build/lib on the simulated fabric (IB), both sides
 * capturing with USCM_PCAP; a fault rule drops every REP until the server's
 * file shows its first REP, then is cleared, so exactly that REP is lost
 * (the server sends it again: on its own timer or on the client's resent
 * REQ). `uscm-decode --ladder` must mark the resent REP "retry #1", and the
 * SVG from `--ladder-svg` must render in headless Chromium:
 *   - a screenshot of the SVG is a PNG of the requested size;
 *   - an HTML page embedding the SVG (base64) parses it with DOMParser as
 *     image/svg+xml (fails on any XML error), counts its arrows and their
 *     arrowhead markers, measures its text, finds the "retry #1" label,
 *     draws it as an <img> onto a canvas and counts the non-white pixels;
 *     --dump-dom prints the result.
 * Chromium is a dependency (scripts/install-deps.sh): without it the test
 * is skipped, and fails under USCM_REQUIRE_ALL=1 (CI). Each Chromium run is bounded by `timeout` and uses its own profile.
 */
#include "libtest.h"

#include <stdint.h>

#include "cm_proto/cmp_mad.h"
#include "umad/um_pcap.h"

TestSuite(ladder, .fini = lt_fini, .timeout = 180);

/* CM MADs of attribute attr in a capture file (0 if unreadable yet). */
static int count_attr(const char *path, uint16_t attr)
{
	struct um_pcap_reader *r = um_pcap_open_read(path, NULL, 0);
	struct um_pcap_mad p;
	int n = 0;

	if (!r)
		return 0;
	while (um_pcap_next(r, &p) == 1) {
		struct cmp_mad_hdr h;

		cmp_layout_decode(&cmp_mad_hdr_layout, p.mad, &h);
		n += h.mgmt_class == 0x07 && h.attr_id == attr;
	}
	um_pcap_close_read(r);
	return n;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *b;
	long n;

	cr_assert(f, "%s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	b = malloc((size_t)n + 1);
	cr_assert(b && fread(b, 1, (size_t)n, f) == (size_t)n);
	b[n] = 0;
	fclose(f);
	*len = (size_t)n;
	return b;
}

static char *base64(const unsigned char *s, size_t n)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *o = malloc(4 * (n / 3 + 1) + 1), *p = o;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) |
			     (i + 2 < n ? s[i + 2] : 0);
		*p++ = a[v >> 18 & 63];
		*p++ = a[v >> 12 & 63];
		*p++ = i + 1 < n ? a[v >> 6 & 63] : '=';
		*p++ = i + 2 < n ? a[v & 63] : '=';
	}
	*p = 0;
	return o;
}

/* The page Chromium loads: checks the SVG and prints one RESULT line. */
static const char page_head[] =
	"<!DOCTYPE html><html><head><title>ladder check</title></head><body>\n"
	"<pre id=\"out\">pending</pre>\n<script>\n(async function () {\n"
	"const out = document.getElementById('out');\ntry {\nconst b64 = \"";
static const char page_tail[] =
	"\";\n"
	"const doc = new DOMParser().parseFromString(atob(b64), 'image/svg+xml');\n"
	"if (doc.getElementsByTagName('parsererror').length) {\n"
	"  out.textContent = 'RESULT parse=0 ' + doc.getElementsByTagName('parsererror')[0].textContent;\n"
	"  return;\n}\n"
	"const svg = document.importNode(doc.documentElement, true);\n"
	"document.body.appendChild(svg);\n"
	"const bb = svg.getBBox();\n"
	"const arrows = svg.querySelectorAll('line.arrow');\n"
	"let heads = 0;\n"
	"for (const l of arrows) {\n"
	"  const m = (l.getAttribute('marker-end') || '').match(/#([^)]+)/);\n"
	"  if (m && svg.querySelector('marker#' + m[1] + ' path')) heads++;\n}\n"
	"let texts = 0, retry = 0;\n"
	"for (const t of svg.querySelectorAll('text')) {\n"
	"  if (t.getComputedTextLength() > 0) texts++;\n"
	"  if (/REP \\[retry #1/.test(t.textContent)) retry++;\n}\n"
	"const img = new Image();\n"
	"img.src = 'data:image/svg+xml;base64,' + b64;\n"
	"await img.decode();\n"
	"const c = document.createElement('canvas');\n"
	"c.width = img.naturalWidth; c.height = img.naturalHeight;\n"
	"const g = c.getContext('2d');\n"
	"g.fillStyle = '#fff'; g.fillRect(0, 0, c.width, c.height);\n"
	"g.drawImage(img, 0, 0);\n"
	"const px = g.getImageData(0, 0, c.width, c.height).data;\n"
	"let ink = 0;\n"
	"for (let i = 0; i < px.length; i += 4)\n"
	"  if (px[i] < 200 || px[i + 1] < 200 || px[i + 2] < 200) ink++;\n"
	"out.textContent = 'RESULT parse=1 bbox=' + Math.round(bb.width) + 'x' + Math.round(bb.height) +\n"
	"  ' arrows=' + arrows.length + ' heads=' + heads + ' texts=' + texts + ' retry=' + retry +\n"
	"  ' img=' + img.naturalWidth + 'x' + img.naturalHeight + ' ink=' + ink + ' pixels=' + px.length / 4;\n"
	"} catch (e) { out.textContent = 'RESULT error ' + e; }\n"
	"})();\n</script></body></html>\n";

static long field(const char *s, const char *key)
{
	const char *p = strstr(s, key);

	cr_assert(p, "no %s in: %s", key, s);
	return strtol(p + strlen(key), NULL, 10);
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void check_in_chromium(const char *svgpath, int mads)
{
	char html[600], png[600], *out = NULL, *svg, *b64, *res;
	size_t len;
	long width, height;
	FILE *f;

	if (lt_sh(NULL, "command -v chromium >/dev/null") != 0)
		tf_skip_missing("chromium is not installed: scripts/install-deps.sh installs it "
				"(the ladder SVG must be checked in a browser)");
	svg = slurp(svgpath, &len);
	width = field(svg, "width=\"");
	height = field(svg, "height=\"");
	cr_assert(width > 200 && height > 200 && width < 10000 && height < 10000, "%ldx%ld", width,
		  height);

	/* 1. A screenshot of the SVG itself. */
	snprintf(png, sizeof(png), "%s/ladder.png", lt_dir);
	lt_sh(&out, "timeout 60 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars"
		    " --user-data-dir=%s/chrome --screenshot=%s --window-size=%ld,%ld file://%s 2>&1",
	      lt_dir, png, width, height, svgpath);
	{
		unsigned char h[24];
		FILE *p = fopen(png, "rb");

		cr_assert(p, "no screenshot from chromium:\n%s", out);
		cr_assert_eq(fread(h, 1, sizeof(h), p), sizeof(h));
		fclose(p);
		cr_expect(!memcmp(h, "\x89PNG\r\n\x1a\n", 8) && !memcmp(h + 12, "IHDR", 4),
			  "not a PNG");
		cr_expect_eq(be32(h + 16), (uint32_t)width, "PNG width");
		cr_expect_eq(be32(h + 20), (uint32_t)height, "PNG height");
	}
	free(out);

	/* 2. Parse, measure and rasterise it in the page. */
	snprintf(html, sizeof(html), "%s/check.html", lt_dir);
	f = fopen(html, "w");
	cr_assert(f);
	b64 = base64((const unsigned char *)svg, len);
	fputs(page_head, f);
	fputs(b64, f);
	fputs(page_tail, f);
	fclose(f);
	free(b64);
	cr_assert_eq(lt_sh(&out, "timeout 60 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage"
				 " --user-data-dir=%s/chrome --virtual-time-budget=10000"
				 " --dump-dom file://%s 2>/dev/null", lt_dir, html),
		     0, "chromium --dump-dom failed or timed out");
	res = strstr(out, "id=\"out\">RESULT ");
	cr_assert(res, "no result from the page:\n%.2000s", out);
	res += strlen("id=\"out\">");
	*strchr(res, '<') = 0;
	cr_log_info("chromium: %s", res);
	cr_assert(strstr(res, "RESULT parse=1 "), "the SVG did not parse: %s", res);
	cr_expect_eq(field(res, " arrows="), mads, "one arrow per MAD: %s", res);
	cr_expect_eq(field(res, " heads="), mads, "each arrow has its arrowhead: %s", res);
	cr_expect_geq(field(res, " texts="), 3 * mads, "labels rendered with a width: %s", res);
	cr_expect_geq(field(res, " retry="), 1, "the resent REP is labelled: %s", res);
	cr_expect_eq(field(res, " img="), width, "%s", res);
	cr_expect_gt(field(res, " bbox="), width / 2, "%s", res);
	/* Lines and text cover a few percent of the picture; blank is 0. */
	cr_expect_gt(field(res, " ink="), field(res, " pixels=") / 100, "%s", res);
	cr_expect_lt(field(res, " ink="), field(res, " pixels=") / 2, "%s", res);
	free(out);
	free(svg);
}

Test(ladder, lost_rep_retry_in_the_svg)
{
	char spcap[512], crc[512], src[512], *out = NULL, *rc = NULL;
	int st = -1, reps = 0;

	if (lt_sh(NULL, "command -v rping >/dev/null") != 0)
		tf_skip_missing("rping (Debian rdmacm-utils) is not installed");
	lt_fabric_start("ib", 2);
	snprintf(spcap, sizeof(spcap), "%s/server.pcap", lt_dir);
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim fault --dir %s/f 'drop=100%%,class=0x07,attr=0x13' 2>&1",
			   lt_bin(), lt_dir),
		     0, "%s", out);
	free(out);
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node2 USCM_PCAP=%s %s timeout 60 rping -s -C 1"
			   " >%s/server.out 2>&1; echo $? >%s/server.rc) >/dev/null 2>&1 &",
			   spcap, lt_util_env(), lt_dir, lt_dir),
		     0);
	/* The file is made as rdma_listen opens the port: listening. */
	cr_assert(lt_wait_until(lt_file_size(spcap) >= 24, 10000), "the server did not listen");
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node1 USCM_PCAP=%s/client.pcap %s timeout 60 rping -c"
			   " -a 127.10.0.2 -v -C 1 >%s/client.out 2>&1; echo $? >%s/client.rc)"
			   " >/dev/null 2>&1 &",
			   lt_dir, lt_util_env(), lt_dir, lt_dir),
		     0);
	/* The first REP is sent (and dropped): let the next ones through. */
	lt_wait_until((reps = count_attr(spcap, 0x13)) != 0, 6000);
	lt_sh(NULL, "%s/uscm-sim fault --dir %s/f clear >/dev/null 2>&1", lt_bin(), lt_dir);
	cr_assert_geq(reps, 1, "the server never sent a REP");
	/* Both rpings exit; their statuses follow. */
	snprintf(crc, sizeof(crc), "%s/client.rc", lt_dir);
	snprintf(src, sizeof(src), "%s/server.rc", lt_dir);
	lt_wait_until(lt_file_size(crc) > 0 && lt_file_size(src) > 0, 30000);
	lt_sh(&rc, "cat %s %s 2>/dev/null | tr '\\n' ' '", crc, src);
	lt_sh(&out, "cat %s/client.out %s/server.out", lt_dir, lt_dir);
	cr_assert(rc && !strcmp(rc, "0 0 "), "rping exit statuses (client server): %s\n%s",
		  rc ? rc : "?", out);
	cr_expect(strstr(out, "ping data: rdma-ping-0"), "%s", out);
	free(out);
	free(rc);

	/* The text ladder: the REP resent, marked as a retry. */
	st = lt_sh(&out, "%s/uscm-decode --ladder %s", lt_bin(), spcap);
	cr_assert_eq(st, 0, "%s", out);
	cr_log_info("%s", out);
	const char *rep2 = strstr(out, "<======== REP =========|");
	cr_assert(rep2, "no resent REP drawn:\n%s", out);
	cr_expect(strstr(rep2, "[retry #1, +"), "not marked as a retry:\n%s", out);
	cr_expect(strstr(out, " 0 malformed, 0 unanswered"), "%s", out);
	cr_expect(strstr(out, "<------- DREP ---------|"), "%s", out);
	int mads = (int)strtol(out, NULL, 10);
	cr_expect_geq(mads, 7, "REQ REP REP' RTU DREQ DREP (+ resent REQ): %s", out);
	free(out);

	/* The SVG, in a browser. */
	char svg[512];
	snprintf(svg, sizeof(svg), "%s/ladder.svg", lt_dir);
	cr_assert_eq(lt_sh(&out, "%s/uscm-decode --ladder-svg %s %s 2>&1", lt_bin(), svg, spcap), 0,
		     "%s", out);
	free(out);
	check_in_chromium(svg, mads);
}
