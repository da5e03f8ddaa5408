/* SPDX-License-Identifier: MIT */
/*
 * cfgfile.h - INI files: the mount config (/etc/fusefs/NAME.conf) and a
 * generic line walker other modules use (creds.c reads the AWS
 * credentials file with it).  The only file that includes inih's ini.h.
 *
 * Mount config format:
 *
 *   # /etc/fusefs/data.conf - comments start with '#' or ';'
 *   [mount]
 *   source = rados://datasets/imagenet    ; or s3://BUCKET[/PREFIX]
 *   mountpoint = /mnt/data
 *   cache_dir = /nvme/fusefs/data          ; every option by its long name,
 *   cache-size = 200G                      ; with '-' or '_'
 *   ceph_conf = /etc/ceph/ceph.conf
 *   allow_other = true                     ; flags: true/yes/on/1,
 *   read_mode = direct                     ;   false/no/off/0
 *   metrics = 127.0.0.1:9464
 *
 * Rules:
 *  - one section, [mount]; a key outside it, another section (even an
 *    empty one), an unknown key, a key given twice, a bad value or a
 *    malformed line is an error naming the file, the line and the key;
 *  - keys are the --long option names (fusefs --help) plus "source" and
 *    "mountpoint"; "config" is not allowed inside a config file;
 *  - values are trimmed; " ;" starts an inline comment, so a value
 *    cannot contain it; leading whitespace is ignored (no continuation
 *    lines); lines may be of any length;
 *  - the command line and -o options are applied after the file, so
 *    they override it (a flag set in the file cannot be unset by them);
 *  - credentials never go here: Ceph keys stay in the keyring, S3 keys
 *    in the environment or a credentials file (--credentials-file).
 */
#ifndef FUSEFS_CFGFILE_H
#define FUSEFS_CFGFILE_H

#include "conf.h"

/*
 * cfgfile_each_fn - one line of an INI file: a "name = value" entry in
 * @section ("" before the first header), or, with @name and @value
 * NULL, the header line of @section.  @line counts from 1.
 * Return: 0 to go on, anything else rejects the line (and stops).
 */
typedef int (*cfgfile_each_fn)(void *arg, const char *section,
			       const char *name, const char *value, int line);

/*
 * cfgfile_each() - walk the INI file @path.  The whole file is checked
 * for syntax first: @fn is only called for a well-formed file, in file
 * order, and not after it rejected a line.  Prints nothing.
 * Return: 0, -errno if @path cannot be read, or the number (> 0) of the
 * first malformed line or of the line @fn rejected.
 */
int cfgfile_each(const char *path, cfgfile_each_fn fn, void *arg);

/*
 * cfgfile_load() - apply the [mount] section of @path to @cf through
 * conf_set() (and set cf->source, cf->mountpoint).  Call it before the
 * command line is applied.  Return: 0, or -EINVAL / -errno with a
 * message naming @path, the line and the key printed to stderr.
 */
int cfgfile_load(struct fusefs_conf *cf, const char *path);

#endif
