/*
 * test_um_outfile.c - the rules for files uscmd (root) and the library open
 * for output under a name someone else chose (umad/um_outfile.h): a
 * symlink, a symlinked directory, a directory another user can write, a
 * file another user planted in /tmp-like sticky directories, FIFOs and
 * hard links are refused before a byte is written; the operator's own
 * files open. Each refusal also checks the target kept its content.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "umad/um_outfile.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/uscm-outfile.XXXXXX");
	cr_assert(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(outfile, .init = setup, .fini = teardown);

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

static void expect_content(const char *path, const char *text)
{
	char buf[256] = { 0 };
	FILE *f = fopen(path, "r");

	cr_assert(f);
	cr_expect_eq(fread(buf, 1, sizeof(buf) - 1, f), strlen(text));
	fclose(f);
	cr_expect_str_eq(buf, text, "%s changed", path);
}

static void expect_refused(const char *path, int err)
{
	errno = 0;
	int fd = um_outfile_open(path, 0, 0600);

	if (fd >= 0)
		close(fd);
	cr_expect_eq(fd, -1, "%s was opened", path);
	cr_expect_eq(errno, err, "%s: errno %d (%s), expected %d", path, errno, strerror(errno), err);
}

Test(outfile, own_file_in_own_directory_opens_and_appends)
{
	char p[128];
	int fd;

	snprintf(p, sizeof(p), "%s/a.log", dir);
	fd = um_outfile_open(p, O_APPEND, 0600);
	cr_assert_geq(fd, 0, "%s", strerror(errno));
	cr_expect_eq(write(fd, "x", 1), 1);
	close(fd);
	fd = um_outfile_open(p, O_APPEND, 0600);
	cr_assert_geq(fd, 0);
	cr_expect_eq(write(fd, "y", 1), 1);
	close(fd);
	expect_content(p, "xy");
	struct stat st;
	cr_assert_eq(stat(p, &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0600);
}

Test(outfile, symlink_as_the_file_is_refused)
{
	char victim[128], link[128];

	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(link, sizeof(link), "%s/cm.pcap", dir);
	put(victim, "precious");
	cr_assert_eq(symlink(victim, link), 0);
	expect_refused(link, ELOOP);
	expect_content(victim, "precious");
}

Test(outfile, symlinked_directory_is_refused)
{
	char real[128], link[128], p[160];

	snprintf(real, sizeof(real), "%s/real", dir);
	snprintf(link, sizeof(link), "%s/via", dir);
	cr_assert_eq(mkdir(real, 0700), 0);
	cr_assert_eq(symlink(real, link), 0);
	snprintf(p, sizeof(p), "%s/x.pcap", link);
	expect_refused(p, ELOOP);
	snprintf(p, sizeof(p), "%s/x.pcap", real);
	cr_expect_eq(access(p, F_OK), -1, "the file was created through the link");
}

Test(outfile, directory_others_can_write_is_refused)
{
	char d[128], p[160];

	snprintf(d, sizeof(d), "%s/open", dir);
	cr_assert_eq(mkdir(d, 0700), 0);
	cr_assert_eq(chmod(d, 0777), 0); /* not sticky */
	snprintf(p, sizeof(p), "%s/x.pcap", d);
	expect_refused(p, EACCES);
	cr_expect_eq(access(p, F_OK), -1);
}

Test(outfile, another_users_file_in_a_sticky_directory_is_refused)
{
	char d[128], p[160];

	if (geteuid() != 0)
		cr_skip_test("needs root to plant a file of another uid (CI runs as root)");
	snprintf(d, sizeof(d), "%s/tmp", dir);
	cr_assert_eq(mkdir(d, 0700), 0);
	cr_assert_eq(chmod(d, 01777), 0);
	snprintf(p, sizeof(p), "%s/planted", d);
	put(p, "theirs");
	cr_assert_eq(chown(p, 65534, 65534), 0);
	expect_refused(p, EACCES);
	expect_content(p, "theirs");
	/* our own file there is fine */
	snprintf(p, sizeof(p), "%s/mine", d);
	int fd = um_outfile_open(p, 0, 0600);
	cr_expect_geq(fd, 0, "%s", strerror(errno));
	if (fd >= 0)
		close(fd);
}

Test(outfile, directory_of_another_user_is_refused)
{
	char d[128], p[160];

	if (geteuid() != 0)
		cr_skip_test("needs root to make a directory of another uid (CI runs as root)");
	snprintf(d, sizeof(d), "%s/theirs", dir);
	cr_assert_eq(mkdir(d, 0755), 0);
	cr_assert_eq(chown(d, 65534, 65534), 0);
	snprintf(p, sizeof(p), "%s/x.pcap", d);
	expect_refused(p, EACCES);
}

Test(outfile, fifo_and_hard_link_are_refused)
{
	char fifo[128], victim[128], hl[128];

	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	/* no reader: open(2) itself refuses (O_NONBLOCK), nothing blocks */
	expect_refused(fifo, ENXIO);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(hl, sizeof(hl), "%s/hl.pcap", dir);
	put(victim, "precious");
	cr_assert_eq(link(victim, hl), 0);
	expect_refused(hl, EINVAL);
	expect_content(victim, "precious");
}

Test(outfile, relative_names_follow_the_same_rules)
{
	char cwd[256], p[160];

	cr_assert(getcwd(cwd, sizeof(cwd)));
	cr_assert_eq(chdir(dir), 0);
	snprintf(p, sizeof(p), "%s/victim", dir);
	put(p, "precious");
	cr_assert_eq(symlink("victim", "rel.pcap"), 0);
	expect_refused("rel.pcap", ELOOP);
	int fd = um_outfile_open("./fresh.pcap", 0, 0600);
	cr_expect_geq(fd, 0, "%s", strerror(errno));
	if (fd >= 0)
		close(fd);
	cr_assert_eq(chdir(cwd), 0);
	expect_content(p, "precious");
}
