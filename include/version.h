/* SPDX-License-Identifier: MIT */
/* version.h - the release: `fusefs --version`, fusefs_build_info */
#ifndef FUSEFS_VERSION_H
#define FUSEFS_VERSION_H

#define FUSEFS_VERSION	"0.1.0"	/* keep packaging/fusefs.spec in step */

#endif
